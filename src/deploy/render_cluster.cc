// The eksctl ClusterConfig (eksctl.io/v1alpha5): one managed node group per role, each with
// a label and (except services) a taint so only its role's pods land there.
#include "deploy/pod_spec.h"
#include "deploy/render.h"

namespace moerl::deploy {

namespace {

Json node_group(const InfraConfig& infra, const AppView& app, const NodeGroup& g, bool tainted) {
  Json ng;
  ng["name"] = g.key;
  ng["amiFamily"] = "AmazonLinux2023";
  if (g.instance_types.size() == 1 && g.capacity != Capacity::kSpot) {
    ng["instanceType"] = g.instance_types[0];
  } else {
    ng["instanceTypes"] = g.instance_types;
  }
  ng["minSize"] = g.min_size;
  ng["maxSize"] = g.max_size;
  ng["desiredCapacity"] = g.desired;
  ng["volumeSize"] = g.volume_gib;
  ng["privateNetworking"] = true;
  if (!g.availability_zones.empty()) ng["availabilityZones"] = g.availability_zones;
  ng["labels"] = Json{{kNodeGroupLabel, g.key}};
  if (tainted) {
    ng["taints"] = Json::array({Json{{"key", kNodeGroupLabel}, {"value", g.key}, {"effect", "NoSchedule"}}});
  }
  if (g.capacity == Capacity::kSpot) ng["spot"] = true;
  if (g.efa_interfaces > 0) {
    // eksctl adds the EFA security group and, unless a group is named, a cluster placement group.
    ng["efaEnabled"] = true;
  }
  if (!g.placement_group.empty()) ng["placement"] = Json{{"groupName", g.placement_group}};
  if (g.capacity == Capacity::kCapacityBlock) {
    ng["instanceMarketOptions"] = Json{{"marketType", "capacity-block"}};
    ng["capacityReservation"] =
        Json{{"capacityReservationTarget", Json{{"capacityReservationID", g.capacity_reservation_id}}}};
  }
  Json tags{{"moerl.io/job", app.name}};
  if (g.min_size != g.max_size) {
    // Lets the cluster autoscaler scale this group up from zero for pods that select the label.
    tags["k8s.io/cluster-autoscaler/node-template/label/" + std::string(kNodeGroupLabel)] = g.key;
    ng["iam"] = Json{{"withAddonPolicies", Json{{"autoScaler", true}}}};
  }
  ng["tags"] = tags;
  return ng;
}

}  // namespace

Json render_cluster_config(const InfraConfig& infra, const AppView& app) {
  Json c;
  c["apiVersion"] = "eksctl.io/v1alpha5";
  c["kind"] = "ClusterConfig";
  c["metadata"] = Json{{"name", infra.cluster_name},
                       {"region", infra.region},
                       {"version", infra.kubernetes_version},
                       {"tags", Json{{"moerl.io/job", app.name}}}};
  c["availabilityZones"] = infra.cluster_zones;
  Json iam{{"withOIDC", true}};
  if (infra.iam_mode == IamMode::kPodIdentity) {
    iam["podIdentityAssociations"] = Json::array({Json{{"namespace", infra.namespace_},
                                                       {"serviceAccountName", infra.service_account},
                                                       {"roleARN", infra.role_arn}}});
  }
  c["iam"] = iam;
  // NOTE: the VPC CNI enforces NetworkPolicy (k8s/10-redis.yaml's) only when told to.
  Json addons = Json::array({Json{{"name", "vpc-cni"}, {"configurationValues", R"({"enableNetworkPolicy": "true"})"}},
                             Json{{"name", "coredns"}}, Json{{"name", "kube-proxy"}},
                             Json{{"name", "aws-ebs-csi-driver"}, {"wellKnownPolicies", Json{{"ebsCSIController", true}}}}});
  if (infra.iam_mode == IamMode::kPodIdentity) addons.push_back(Json{{"name", "eks-pod-identity-agent"}});
  c["addons"] = addons;
  c["managedNodeGroups"] = Json::array({node_group(infra, app, infra.services, false),
                                        node_group(infra, app, infra.buffer, true),
                                        node_group(infra, app, infra.training, true),
                                        node_group(infra, app, infra.rollout, true)});
  return c;
}

}  // namespace moerl::deploy
