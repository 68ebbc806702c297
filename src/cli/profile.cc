// profile_region: Kineto around a callback, then a per-kernel summary read back from the trace.
#include "cli/profile.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <set>

#include "base/error.h"

namespace moerl::cli {
namespace {

namespace prof = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

// Device-side work in a Kineto trace: kernels, copies and fills.
bool device_event(const std::string& cat) { return cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset"; }

struct Total {
  double us = 0;
  int64_t calls = 0;
};

}  // namespace

nlohmann::json profile_region(const std::string& trace_path, const std::function<void()>& body, int top) {
  std::set<ActivityType> activities{ActivityType::CPU};
  if (at::hasCUDA()) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  try {
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
  } catch (const c10::Error& e) {
    throw Error(std::string("--profile: the profiler did not start: ") + e.what_without_backtrace(),
                "this libtorch may lack Kineto; profile on the GPU image", ErrorCode::kInvalidInput);
  }
  const auto t0 = std::chrono::steady_clock::now();
  try {
    body();
  } catch (...) {
    prof::disableProfiler();
    throw;
  }
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::unique_ptr<prof::ProfilerResult> result = prof::disableProfiler();
  try {
    result->save(trace_path);
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    if (why.find("Kineto") != std::string::npos) {
      throw Error("--profile " + trace_path + ": this libtorch was built without Kineto, so it writes no trace",
                  "profile with a PyTorch build that has it, e.g. on the GPU image (dev/gpu/env.sh)",
                  ErrorCode::kInvalidInput);
    }
    throw Error("--profile " + trace_path + ": the trace was not written: " + why, "give a writable path",
                ErrorCode::kIo);
  }
  std::ifstream in(trace_path);
  nlohmann::json trace = in ? nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false) : nlohmann::json();
  if (trace.is_discarded() || !trace.is_object()) {
    throw Error("--profile " + trace_path + ": the trace written is missing or not JSON",
                "check the path's directory exists and is writable", ErrorCode::kIo);
  }
  std::map<std::string, Total> by_name;
  double busy_us = 0;
  for (const nlohmann::json& e : trace.value("traceEvents", nlohmann::json::array())) {
    if (!e.is_object() || !device_event(e.value("cat", std::string())) || !e.contains("dur")) continue;
    Total& t = by_name[e.value("name", std::string("?"))];
    t.us += e["dur"].get<double>();
    ++t.calls;
    busy_us += e["dur"].get<double>();
  }
  std::vector<std::pair<std::string, Total>> sorted(by_name.begin(), by_name.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < sorted.size() && static_cast<int>(i) < top; ++i) {
    const auto& [name, t] = sorted[i];
    rows.push_back({{"name", name.size() > 160 ? name.substr(0, 160) + "..." : name},
                    {"ms", t.us / 1e3},
                    {"calls", t.calls},
                    {"share", busy_us > 0 ? t.us / busy_us : 0.0}});
  }
  nlohmann::json out = {{"trace", trace_path},  {"wall_ms", wall_ms},          {"gpu_busy_ms", busy_us / 1e3},
                        {"kernel_names", sorted.size()}, {"top", rows}};
  if (by_name.empty()) out["note"] = "no device events recorded (no GPU, or a libtorch without Kineto)";
  return out;
}

}  // namespace moerl::cli
