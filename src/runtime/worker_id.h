// Rollout worker ids: the consumer name a worker leases under (Redis XREADGROUP/XCLAIM), the
// name of its scratch directory under the run dir, and its metrics label. Ids must be unique
// among live workers: two workers with one id take over each other's leases.
//
//   std::string id = default_worker_id();   // "moerl-rollout-7d9f-x2k4p-3fa91c": POD_NAME
//                                           // (else the hostname) + 6 random hex per start
//   check_worker_id(flag_value);            // a --worker-id given by hand
// Pure functions; default_worker_id() reads /dev/urandom (std::random_device) once per call.
#pragma once

#include <string>

namespace moerl::runtime {

// Longest id kept (a Kubernetes pod name is at most 253 characters; a consumer name and a
// directory name are happier short).
constexpr size_t kMaxWorkerIdChars = 96;

// `host` (a pod name or hostname) + "-" + 6 random hex characters, sanitised: characters
// outside [A-Za-z0-9._-] become '-', leading dots and dashes are dropped, and the host part
// is cut so the whole id fits kMaxWorkerIdChars. An empty host gives "worker-<hex>".
std::string make_worker_id(const std::string& host, const std::string& suffix);

// 6 lowercase hex characters from std::random_device (/dev/urandom).
std::string random_worker_suffix();

// POD_NAME (the manifests set it from the downward API's metadata.name), else the hostname,
// else "".
std::string pod_name_or_hostname();

// make_worker_id(pod_name_or_hostname(), random_worker_suffix()): unique per pod
// (POD_NAME from the downward API) and per process start (the suffix), also when every pod's
// PID is the same.
std::string default_worker_id();

// Throws moerl::Error (kInvalidInput) naming `id` when it is empty, too long, holds a
// character outside [A-Za-z0-9._-] or is reserved ("__handback__" is the queue's hand-back
// consumer; "." and ".." are not directory names).
void check_worker_id(const std::string& id);

}  // namespace moerl::runtime
