// Binary encoding of TaskUnit / ExperienceRecord: a 16-byte header (magic, version, flags,
// payload length, CRC-32C of the payload) followed by the little-endian payload. Field order
// is fixed by the specs in docs/formats/; any change bumps the version.
#include "runtime/records.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/error.h"
#include "io/checksum.h"
#include "runtime/byte_codec.h"

namespace moerl::runtime {
namespace {

constexpr char kTaskMagic[4] = {'M', 'R', 'T', 'K'};
constexpr char kExperienceMagic[4] = {'M', 'R', 'E', 'X'};
constexpr size_t kHeaderBytes = 16;
constexpr uint32_t kMaxPayloadBytes = 1u << 30;

[[noreturn]] void bad(const std::string& what, const std::string& hint) {
  throw Error(what, hint, ErrorCode::kIo);
}

}  // namespace

std::string frame_record(const char magic[4], uint16_t version, const std::string& payload) {
  if (payload.size() > kMaxPayloadBytes) {
    throw Error("record payload is " + std::to_string(payload.size()) + " bytes, above the " +
                    std::to_string(kMaxPayloadBytes) + "-byte limit",
                "split the prompt group or shorten responses");
  }
  ByteWriter w;
  w.bytes().append(magic, 4);
  w.put<uint16_t>(version);
  w.put<uint16_t>(0);  // flags: none defined in version 1
  w.put<uint32_t>(static_cast<uint32_t>(payload.size()));
  w.put<uint32_t>(io::crc32c(payload.data(), payload.size()));
  w.bytes() += payload;
  return std::move(w.bytes());
}

std::string_view unframe_record(std::string_view bytes, const char magic[4], uint16_t version,
                                const char* what) {
  uint16_t got = 0;
  return unframe_record(bytes, magic, version, version, &got, what);
}

std::string_view unframe_record(std::string_view bytes, const char magic[4], uint16_t min_version,
                                uint16_t max_version, uint16_t* got_version, const char* what) {
  if (bytes.size() < kHeaderBytes) {
    bad(std::string(what) + ": " + std::to_string(bytes.size()) + " bytes is shorter than the " +
            std::to_string(kHeaderBytes) + "-byte header",
        "the record was truncated or is not a moerl record");
  }
  if (std::memcmp(bytes.data(), magic, 4) != 0) {
    bad(std::string(what) + ": bad magic '" + std::string(bytes.substr(0, 4)) + "', expected '" +
            std::string(magic, 4) + "'",
        "this is not a moerl " + std::string(what) + " (wrong stream or key?)");
  }
  ByteReader h(bytes.substr(4, kHeaderBytes - 4), what);
  uint16_t version = h.get<uint16_t>();
  uint16_t flags = h.get<uint16_t>();
  uint32_t len = h.get<uint32_t>();
  uint32_t crc = h.get<uint32_t>();
  if (version < min_version || version > max_version) {
    bad(std::string(what) + ": format version " + std::to_string(version) +
            " is not supported (this build reads versions " + std::to_string(min_version) + " to " +
            std::to_string(max_version) + ")",
        "run the same moerl build on every role (trainer, rollout workers)");
  }
  *got_version = version;
  if (flags != 0) {
    bad(std::string(what) + ": header flags " + std::to_string(flags) +
            " are not defined in version " + std::to_string(version),
        "the writer is a newer or corrupted build; run the same moerl build on every role");
  }
  if (len != bytes.size() - kHeaderBytes) {
    bad(std::string(what) + ": header says " + std::to_string(len) + " payload bytes, found " +
            std::to_string(bytes.size() - kHeaderBytes),
        "the record was truncated or concatenated with another");
  }
  std::string_view payload = bytes.substr(kHeaderBytes);
  uint32_t actual = io::crc32c(payload.data(), payload.size());
  if (actual != crc) {
    bad(std::string(what) + ": checksum mismatch (header crc32c " + std::to_string(crc) +
            ", payload crc32c " + std::to_string(actual) + ")",
        "the record was corrupted in transit or storage; it is rejected");
  }
  return payload;
}

namespace {

void expect_consumed(const ByteReader& r, const char* what) {
  if (r.remaining() != 0) {
    bad(std::string(what) + ": " + std::to_string(r.remaining()) +
            " unexpected bytes after the last field",
        "writer and reader disagree on the format; run the same moerl build on every role");
  }
}

}  // namespace

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAborted: return "aborted";
  }
  return "unknown";
}

std::string dedupe_key(std::string_view task_id, uint32_t attempt) {
  return std::string(task_id) + "#" + std::to_string(attempt);
}

uint64_t oldest_version(const ExperienceRecord& r) {
  uint64_t oldest = std::numeric_limits<uint64_t>::max();
  for (const Sample& s : r.samples) {
    for (const VersionSpan& span : s.version_spans) oldest = std::min(oldest, span.version);
  }
  return oldest == std::numeric_limits<uint64_t>::max() ? 0 : oldest;
}

uint64_t newest_version(const ExperienceRecord& r) {
  uint64_t newest = 0;
  for (const Sample& s : r.samples) {
    for (const VersionSpan& span : s.version_spans) newest = std::max(newest, span.version);
  }
  return newest;
}

uint64_t staleness(const ExperienceRecord& r, uint64_t current_version) {
  uint64_t oldest = oldest_version(r);
  return current_version > oldest ? current_version - oldest : 0;
}

uint64_t token_lag_sum(const ExperienceRecord& r, uint64_t current_version) {
  uint64_t sum = 0;
  for (const Sample& s : r.samples) {
    for (size_t i = 0; i < s.version_spans.size(); ++i) {
      const uint64_t end = i + 1 < s.version_spans.size() ? s.version_spans[i + 1].start : s.response_tokens.size();
      const uint64_t v = s.version_spans[i].version, tokens = end - std::min<uint64_t>(end, s.version_spans[i].start);
      sum += tokens * (current_version > v ? current_version - v : 0);
    }
  }
  return sum;
}

int64_t total_response_tokens(const ExperienceRecord& r) {
  int64_t n = 0;
  for (const Sample& s : r.samples) n += static_cast<int64_t>(s.response_tokens.size());
  return n;
}

bool has_signal(const ExperienceRecord& r, double tol) {
  if (r.samples.empty()) return false;
  auto [lo, hi] = std::minmax_element(r.samples.begin(), r.samples.end(),
                                      [](const Sample& a, const Sample& b) { return a.reward < b.reward; });
  return static_cast<double>(hi->reward) - static_cast<double>(lo->reward) > tol;
}

void validate(const TaskUnit& t) {
  if (t.task_id.empty()) {
    throw Error("task unit: task_id is empty", "give every prompt group a stable, unique id");
  }
  if (t.group_size < 1) {
    throw Error("task unit '" + t.task_id + "': group_size=0, expected >= 1",
                "set rollout group size (responses per prompt) to at least 1");
  }
  if (t.prompt_ids.empty() && t.prompt_text.empty()) {
    throw Error("task unit '" + t.task_id + "': neither prompt_ids nor prompt_text is set",
                "a task needs a prompt: tokenize it or pass the text");
  }
}

void validate(const ExperienceRecord& r) {
  auto fail = [&](size_t i, const std::string& what) {
    throw Error("experience record '" + r.task_id + "#" + std::to_string(r.attempt) +
                    "' sample " + std::to_string(i) + ": " + what,
                "the rollout worker built an inconsistent record; this is a bug in the worker");
  };
  if (r.task_id.empty()) {
    throw Error("experience record: task_id is empty",
                "copy task_id and attempt from the leased task unit");
  }
  for (size_t i = 0; i < r.samples.size(); ++i) {
    const Sample& s = r.samples[i];
    if (s.behaviour_logprobs.size() != s.response_tokens.size()) {
      fail(i, std::to_string(s.behaviour_logprobs.size()) + " behaviour logprobs for " +
                  std::to_string(s.response_tokens.size()) + " response tokens (need one each)");
    }
    if (s.version_spans.empty()) fail(i, "no version spans (need at least one, starting at 0)");
    if (s.version_spans[0].start != 0) {
      fail(i, "first version span starts at " + std::to_string(s.version_spans[0].start) +
                  ", expected 0");
    }
    for (size_t k = 1; k < s.version_spans.size(); ++k) {
      const VersionSpan& a = s.version_spans[k - 1];
      const VersionSpan& b = s.version_spans[k];
      if (b.start <= a.start || b.start >= s.response_tokens.size()) {
        fail(i, "version span " + std::to_string(k) + " starts at " + std::to_string(b.start) +
                    " (previous " + std::to_string(a.start) + ", " +
                    std::to_string(s.response_tokens.size()) +
                    " tokens): starts must increase and stay inside the response");
      }
      if (b.version < a.version) {
        fail(i, "version span " + std::to_string(k) + " has version " + std::to_string(b.version) +
                    " below the previous span's " + std::to_string(a.version));
      }
    }
    auto reason = static_cast<uint8_t>(s.finish_reason);
    if (reason > static_cast<uint8_t>(FinishReason::kAborted)) {
      fail(i, "finish reason " + std::to_string(reason) + " is not one of 0 stop, 1 length, 2 aborted");
    }
    if (!std::isfinite(s.reward)) fail(i, "reward is not finite");
    if (!s.routed_experts.empty()) {
      const size_t want = s.routed_tokens() * s.routing_layers * s.routing_top_k;
      if (s.response_tokens.empty() || s.routed_experts.size() != want) {
        fail(i, "routing replay holds " + std::to_string(s.routed_experts.size()) + " expert ids, expected " +
                    std::to_string(want) + " (" + std::to_string(s.prompt_tokens.size()) + " prompt + " +
                    std::to_string(s.response_tokens.size()) + " response tokens - 1, x " +
                    std::to_string(s.routing_layers) + " layers x top-" + std::to_string(s.routing_top_k) + ")");
      }
    }
  }
}

std::string encode_task(const TaskUnit& t) {
  validate(t);
  ByteWriter w;
  w.put_string(t.task_id);
  w.put<uint32_t>(t.attempt);
  w.put<uint32_t>(t.group_size);
  w.put<uint64_t>(t.cursor);
  w.put<int64_t>(t.created_unix_ms);
  w.put_vector(t.prompt_ids);
  w.put_string(t.prompt_text);
  w.put_string(t.reference);
  return frame_record(kTaskMagic, kTaskRecordVersion, w.bytes());
}

TaskUnit decode_task(std::string_view bytes) {
  constexpr const char* kWhat = "task record";
  ByteReader r(unframe_record(bytes, kTaskMagic, kTaskRecordVersion, kWhat), kWhat);
  TaskUnit t;
  t.task_id = r.get_string();
  t.attempt = r.get<uint32_t>();
  t.group_size = r.get<uint32_t>();
  t.cursor = r.get<uint64_t>();
  t.created_unix_ms = r.get<int64_t>();
  t.prompt_ids = r.get_vector<int32_t>();
  t.prompt_text = r.get_string();
  t.reference = r.get_string();
  expect_consumed(r, kWhat);
  try {
    validate(t);
  } catch (const Error& e) {
    bad(std::string(kWhat) + ": " + e.message(), e.hint());
  }
  return t;
}

namespace {

// Routing replay ids (version 2): u16 layers, u16 top_k, u8 width (1: uint8 ids, every id
// < 256; 2: uint16), then vec<u8 | u16>.
void put_routing(ByteWriter& w, const Sample& s) {
  w.put<uint16_t>(s.routing_layers);
  w.put<uint16_t>(s.routing_top_k);
  const bool narrow = std::all_of(s.routed_experts.begin(), s.routed_experts.end(), [](uint16_t e) { return e < 256; });
  w.put<uint8_t>(narrow ? 1 : 2);
  if (narrow) {
    w.put_vector(std::vector<uint8_t>(s.routed_experts.begin(), s.routed_experts.end()));
  } else {
    w.put_vector(s.routed_experts);
  }
}

void get_routing(ByteReader& r, Sample& s) {
  s.routing_layers = r.get<uint16_t>();
  s.routing_top_k = r.get<uint16_t>();
  const uint8_t width = r.get<uint8_t>();
  if (width == 1) {
    std::vector<uint8_t> ids = r.get_vector<uint8_t>();
    s.routed_experts.assign(ids.begin(), ids.end());
  } else if (width == 2) {
    s.routed_experts = r.get_vector<uint16_t>();
  } else {
    bad("experience record: routing id width " + std::to_string(width) + " is not 1 or 2",
        "the record is corrupted or from a different build");
  }
}

}  // namespace

std::string encode_experience(const ExperienceRecord& rec) {
  validate(rec);
  ByteWriter w;
  w.put_string(rec.task_id);
  w.put<uint32_t>(rec.attempt);
  w.put_string(rec.worker_id);
  w.put<uint64_t>(rec.cursor);
  w.put<int64_t>(rec.leased_unix_ms);
  w.put<int64_t>(rec.finished_unix_ms);
  w.put<double>(rec.generate_seconds);
  w.put<double>(rec.reward_seconds);
  w.put<uint32_t>(static_cast<uint32_t>(rec.samples.size()));
  for (const Sample& s : rec.samples) {
    w.put_vector(s.prompt_tokens);
    w.put_vector(s.response_tokens);
    w.put_vector(s.behaviour_logprobs);
    w.put<float>(s.reward);
    w.put<uint32_t>(static_cast<uint32_t>(s.version_spans.size()));
    for (const VersionSpan& span : s.version_spans) {
      w.put<uint32_t>(span.start);
      w.put<uint64_t>(span.version);
    }
    w.put<uint8_t>(static_cast<uint8_t>(s.finish_reason));
    w.put<double>(s.generate_seconds);
    put_routing(w, s);
  }
  return frame_record(kExperienceMagic, kExperienceRecordVersion, w.bytes());
}

ExperienceRecord decode_experience(std::string_view bytes) {
  constexpr const char* kWhat = "experience record";
  uint16_t version = 0;
  ByteReader r(unframe_record(bytes, kExperienceMagic, 1, kExperienceRecordVersion, &version, kWhat), kWhat);
  ExperienceRecord rec;
  rec.task_id = r.get_string();
  rec.attempt = r.get<uint32_t>();
  rec.worker_id = r.get_string();
  rec.cursor = r.get<uint64_t>();
  rec.leased_unix_ms = r.get<int64_t>();
  rec.finished_unix_ms = r.get<int64_t>();
  rec.generate_seconds = r.get<double>();
  rec.reward_seconds = r.get<double>();
  uint32_t num_samples = r.get<uint32_t>();
  // NOTE: each sample takes at least 29 bytes; bound the reservation by what is left.
  rec.samples.reserve(std::min<size_t>(num_samples, r.remaining() / 29 + 1));
  for (uint32_t i = 0; i < num_samples; ++i) {
    Sample s;
    s.prompt_tokens = r.get_vector<int32_t>();
    s.response_tokens = r.get_vector<int32_t>();
    s.behaviour_logprobs = r.get_vector<float>();
    s.reward = r.get<float>();
    uint32_t num_spans = r.get<uint32_t>();
    for (uint32_t k = 0; k < num_spans; ++k) {
      VersionSpan span;
      span.start = r.get<uint32_t>();
      span.version = r.get<uint64_t>();
      s.version_spans.push_back(span);
    }
    s.finish_reason = static_cast<FinishReason>(r.get<uint8_t>());
    s.generate_seconds = r.get<double>();
    if (version >= 2) get_routing(r, s);
    rec.samples.push_back(std::move(s));
  }
  expect_consumed(r, kWhat);
  try {
    validate(rec);
  } catch (const Error& e) {
    bad(std::string(kWhat) + ": " + e.message(), e.hint());
  }
  return rec;
}

}  // namespace moerl::runtime
