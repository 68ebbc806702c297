// Checks a JSON schema cannot express, across the rendered objects and the eksctl config:
// requests == limits for hugepages / GPUs / EFA, EFA and GPU counts within the node group's
// instance type, Spot grace period under 120 s, trainer never on Spot, tolerations covering
// the target group's taints, DNS-1123 names, one AZ for EFA node groups, no privileged
// containers or hostPath mounts outside the EFA device plugin, every pod non-root (but the
// plugin) with seccomp RuntimeDefault and every capability dropped, and references that resolve.
'use strict';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const PORT_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const NODE_GROUP_LABEL = 'moerl.io/node-group';
const DEVICE_PLUGIN = 'aws-efa-k8s-device-plugin-daemonset';
const MUST_MATCH = [/^hugepages-/, /^nvidia\.com\/gpu$/, /^vpc\.amazonaws\.com\/efa$/];

function label(obj) { return `${obj.kind}/${obj.metadata && obj.metadata.name}`; }

// Every pod template inside an object, with where it sits and what runs it.
function podTemplates(obj) {
  const out = [];
  const s = obj.spec || {};
  switch (obj.kind) {
    case 'Deployment': case 'StatefulSet': case 'DaemonSet': case 'Job':
      if (s.template) out.push({ where: '/spec/template', tmpl: s.template });
      break;
    case 'PyTorchJob':
      for (const [r, spec] of Object.entries(s.pytorchReplicaSpecs || {})) {
        out.push({ where: `/spec/pytorchReplicaSpecs/${r}/template`, tmpl: spec.template || {} });
      }
      break;
    case 'JobSet':
      (s.replicatedJobs || []).forEach((rj, i) => {
        const t = ((rj.template || {}).spec || {}).template;
        if (t) out.push({ where: `/spec/replicatedJobs/${i}/template/spec/template`, tmpl: t });
      });
      break;
    default:
      break;
  }
  return out;
}

function isTrainer(obj) {
  return obj.kind === 'PyTorchJob' || obj.kind === 'JobSet' || obj.kind === 'Job';
}

function checkNames(obj, err) {
  const md = obj.metadata || {};
  const nameRe = ['Namespace', 'Service'].includes(obj.kind) ? DNS1123_LABEL : DNS1123_SUBDOMAIN;
  if (!md.name || !nameRe.test(md.name) || md.name.length > (nameRe === DNS1123_LABEL ? 63 : 253)) {
    err(`metadata.name "${md.name}" is not a DNS-1123 ${nameRe === DNS1123_LABEL ? 'label' : 'subdomain'}`);
  }
  if (md.namespace !== undefined && !DNS1123_LABEL.test(md.namespace)) err(`metadata.namespace "${md.namespace}" is not a DNS-1123 label`);
  for (const [k, v] of Object.entries(md.labels || {})) {
    if (typeof v !== 'string' || v.length > 63 || !LABEL_VALUE.test(v)) err(`label ${k}="${v}" is not a valid label value`);
  }
}

function checkPod(obj, where, tmpl, ctx, err) {
  const spec = tmpl.spec || {};
  const isPlugin = obj.kind === 'DaemonSet' && obj.metadata.name === DEVICE_PLUGIN;
  const containers = [...(spec.containers || []), ...(spec.initContainers || [])];
  let gpus = 0, efa = 0, hugepages = 0;
  const psc = spec.securityContext || {};
  if (((psc.seccompProfile || {}).type) !== 'RuntimeDefault') err(`${where}/spec/securityContext: seccompProfile.type must be RuntimeDefault`);
  if (psc.runAsNonRoot !== true && !isPlugin) err(`${where}/spec/securityContext: runAsNonRoot must be true`);
  containers.forEach((c, i) => {
    const at = `${where}/spec/containers/${i}`;
    if (!DNS1123_LABEL.test(c.name || '')) err(`${at}/name "${c.name}" is not a DNS-1123 label`);
    for (const p of c.ports || []) {
      if (p.name !== undefined && (!PORT_NAME.test(p.name) || p.name.length > 15)) err(`${at}: port name "${p.name}" is not an IANA service name (<= 15 chars)`);
    }
    const req = (c.resources || {}).requests || {}, lim = (c.resources || {}).limits || {};
    for (const key of new Set([...Object.keys(req), ...Object.keys(lim)])) {
      if (MUST_MATCH.some((re) => re.test(key)) && String(req[key]) !== String(lim[key])) {
        err(`${at}/resources: ${key} requests (${req[key]}) must equal limits (${lim[key]})`);
      }
    }
    gpus += Number(lim['nvidia.com/gpu'] || 0);
    efa += Number(lim['vpc.amazonaws.com/efa'] || 0);
    if (lim['hugepages-2Mi']) hugepages += 1;
    const sc = c.securityContext || {};
    if (sc.privileged === true && !isPlugin) err(`${at}: privileged container outside the EFA device plugin`);
    if (sc.allowPrivilegeEscalation !== false) err(`${at}: securityContext.allowPrivilegeEscalation must be false`);
    const drop = (sc.capabilities || {}).drop || [];
    if (!drop.includes('ALL')) err(`${at}: securityContext.capabilities.drop must include ALL`);
  });
  (spec.volumes || []).forEach((v, i) => {
    if (!DNS1123_LABEL.test(v.name || '')) err(`${where}/spec/volumes/${i}/name "${v.name}" is not a DNS-1123 label`);
    if (v.hostPath && !isPlugin) err(`${where}/spec/volumes/${i}: hostPath ${v.hostPath.path} outside the EFA device plugin (devices come from the plugin)`);
    if (v.configMap && !ctx.configMaps.has(v.configMap.name)) err(`${where}: volume ${v.name} names ConfigMap ${v.configMap.name}, which is not rendered`);
  });
  if (efa > 0 && hugepages === 0) err(`${where}: requests vpc.amazonaws.com/efa without hugepages-2Mi (libfabric's EFA provider needs them)`);
  if (isPlugin) return;
  // Node group the pod is pinned to.
  const groupName = (spec.nodeSelector || {})[NODE_GROUP_LABEL];
  if (!groupName) { err(`${where}: no nodeSelector ${NODE_GROUP_LABEL}: the pod could land on any node group`); return; }
  const group = ctx.groups.get(groupName);
  if (!group) { err(`${where}: nodeSelector ${NODE_GROUP_LABEL}=${groupName} matches no eksctl node group`); return; }
  for (const t of group.taints || []) {
    const ok = (spec.tolerations || []).some((tol) => (tol.operator === 'Exists' && (!tol.key || tol.key === t.key)) ||
                                                      (tol.key === t.key && tol.value === t.value && (!tol.effect || tol.effect === t.effect)));
    if (!ok) err(`${where}: no toleration for taint ${t.key}=${t.value}:${t.effect} of node group ${groupName}`);
  }
  const types = group.instanceTypes || [group.instanceType];
  for (const name of types) {
    const t = ctx.instanceTypes[name];
    if (!t) { err(`node group ${groupName}: unknown instance type ${name}`); continue; }
    if (efa > t.efa_interfaces) err(`${where}: requests ${efa} EFA interfaces, ${name} has ${t.efa_interfaces}`);
    if (gpus > t.gpus) err(`${where}: requests ${gpus} GPUs, ${name} has ${t.gpus}`);
  }
  if (efa > 0 && !group.efaEnabled) err(`${where}: requests EFA but node group ${groupName} is not efaEnabled`);
  if (group.spot) {
    if (isTrainer(obj)) err(`${where}: the trainer is pinned to Spot node group ${groupName}; it must run on on-demand nodes`);
    const g = spec.terminationGracePeriodSeconds;
    if (!(Number.isInteger(g) && g < 120)) err(`${where}: terminationGracePeriodSeconds (${g}) must be set and < 120 on Spot node group ${groupName}`);
  }
  if (isTrainer(obj)) {
    const terms = (((spec.affinity || {}).nodeAffinity || {}).requiredDuringSchedulingIgnoredDuringExecution || {}).nodeSelectorTerms || [];
    const onDemand = terms.length > 0 && terms.every((term) => (term.matchExpressions || []).some((e) =>
      e.key === 'eks.amazonaws.com/capacityType' && e.operator === 'In' && !e.values.includes('SPOT')));
    if (!onDemand) err(`${where}: the trainer needs a required node affinity excluding SPOT capacity`);
  }
}

// objects: [{file, index, obj}], cluster: eksctl ClusterConfig, instanceTypes: {name: facts}.
function semanticChecks(objects, cluster, instanceTypes) {
  const errors = [];
  const groups = new Map();
  for (const ng of (cluster && cluster.managedNodeGroups) || []) {
    const name = (ng.labels || {})[NODE_GROUP_LABEL];
    if (name) groups.set(name, ng);
    const where = `eksctl-cluster.yaml: managedNodeGroups/${ng.name}`;
    if (ng.efaEnabled) {
      if (!Array.isArray(ng.availabilityZones) || ng.availabilityZones.length !== 1) {
        errors.push(`${where}: efaEnabled node group must list exactly one availability zone (has ${JSON.stringify(ng.availabilityZones)})`);
      }
      for (const name of ng.instanceTypes || [ng.instanceType]) {
        const t = instanceTypes[name];
        if (t && t.efa_interfaces === 0) errors.push(`${where}: efaEnabled on ${name}, which has no EFA`);
      }
    }
    for (const name of ng.instanceTypes || [ng.instanceType]) {
      if (!instanceTypes[name]) errors.push(`${where}: unknown instance type ${name}`);
    }
    if (!DNS1123_LABEL.test(ng.name)) errors.push(`${where}: name is not a DNS-1123 label`);
  }
  const ctx = { groups, instanceTypes, configMaps: new Set() };
  const deployments = new Map();
  for (const { obj } of objects) {
    if (obj.kind === 'ConfigMap') ctx.configMaps.add(obj.metadata.name);
    if (obj.kind === 'Deployment') deployments.set(obj.metadata.name, obj);
  }
  for (const { file, index, obj } of objects) {
    const err = (m) => errors.push(`${file}: document ${index} (${label(obj)}): ${m}`);
    checkNames(obj, err);
    for (const { where, tmpl } of podTemplates(obj)) checkPod(obj, where, tmpl, ctx, err);
    if (obj.kind === 'PodDisruptionBudget' || obj.kind === 'HorizontalPodAutoscaler') {
      const target = obj.kind === 'HorizontalPodAutoscaler' ? deployments.get(obj.spec.scaleTargetRef.name)
                                                              : [...deployments.values()].find((d) =>
        Object.entries(obj.spec.selector.matchLabels || {}).every(([k, v]) => ((d.spec.template.metadata || {}).labels || {})[k] === v));
      if (!target) err('selects no rendered Deployment');
    }
    if (obj.kind === 'HorizontalPodAutoscaler' && obj.spec.minReplicas > obj.spec.maxReplicas) err('minReplicas > maxReplicas');
    if (obj.kind === 'StatefulSet' && ((obj.metadata.labels || {})['app.kubernetes.io/component']) === 'redis') {
      const podLabels = (obj.spec.template.metadata || {}).labels || {};
      const covered = objects.some(({ obj: np }) => np.kind === 'NetworkPolicy' && np.metadata.namespace === obj.metadata.namespace &&
        (np.spec.policyTypes || []).includes('Ingress') &&
        Object.entries((np.spec.podSelector || {}).matchLabels || {}).every(([k, v]) => podLabels[k] === v));
      if (!covered) err('no NetworkPolicy limits who reaches Redis');
    }
  }
  return errors;
}

module.exports = { semanticChecks, podTemplates };
