// Worker ids unique per pod and per process start (see worker_id.h).
#include "runtime/worker_id.h"

#include <unistd.h>

#include <cstdio>
#include <random>

#include "base/env.h"
#include "base/error.h"

namespace moerl::runtime {
namespace {

bool id_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

std::string pod_name_or_hostname() {
  if (auto v = env::get("POD_NAME")) return *v;
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0) return host;
  return "";
}

std::string make_worker_id(const std::string& host, const std::string& suffix) {
  std::string h;
  for (char c : host) h.push_back(id_char(c) ? c : '-');
  const size_t lead = h.find_first_not_of(".-");
  h = lead == std::string::npos ? "" : h.substr(lead);
  if (h.empty()) h = "worker";
  std::string s;
  for (char c : suffix.substr(0, 16)) s.push_back(id_char(c) ? c : '-');
  const size_t room = kMaxWorkerIdChars - 1 - s.size();
  if (h.size() > room) h.resize(room);
  return h + "-" + s;
}

std::string random_worker_suffix() {
  std::random_device rd;  // /dev/urandom on Linux: differs between pods and between starts
  char buf[16];
  std::snprintf(buf, sizeof buf, "%06x", static_cast<unsigned>(rd()) & 0xffffffu);
  return buf;
}

std::string default_worker_id() { return make_worker_id(pod_name_or_hostname(), random_worker_suffix()); }

void check_worker_id(const std::string& id) {
  const char* hint = "use letters, digits, '.', '_' and '-' (at most 96), unique per worker; or leave --worker-id "
                     "out: the default is POD_NAME (else the hostname) plus a random suffix";
  if (id.empty() || id.size() > kMaxWorkerIdChars) {
    throw Error("--worker-id '" + id + "' has " + std::to_string(id.size()) + " characters", hint,
                ErrorCode::kInvalidInput);
  }
  for (char c : id) {
    if (!id_char(c)) {
      throw Error("--worker-id '" + id + "' holds the character '" + std::string(1, c) + "'", hint,
                  ErrorCode::kInvalidInput);
    }
  }
  if (id == "__handback__" || id == "." || id == "..") {
    throw Error("--worker-id '" + id + "' is reserved", hint, ErrorCode::kInvalidInput);
  }
}

}  // namespace moerl::runtime
