// Test-only helpers: random task units / experience records and a field-by-field compare.
// Header-only, included by runtime's *_test.cc files.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "runtime/records.h"

namespace moerl::runtime {

inline TaskUnit make_task(const std::string& id, uint64_t cursor, uint32_t attempt = 0) {
  TaskUnit t;
  t.task_id = id;
  t.attempt = attempt;
  t.group_size = 2;
  t.prompt_ids = {101, static_cast<int32_t>(cursor % 1000) + 7, 55};
  t.prompt_text = "prompt " + id;
  t.cursor = cursor;
  return t;
}

inline ExperienceRecord record_for(const TaskUnit& t, const std::string& worker, uint64_t version) {
  ExperienceRecord r;
  r.task_id = t.task_id;
  r.attempt = t.attempt;
  r.worker_id = worker;
  r.cursor = t.cursor;
  for (uint32_t g = 0; g < t.group_size; ++g) {
    Sample s;
    s.prompt_tokens = t.prompt_ids;
    s.response_tokens = {static_cast<int32_t>(g + 3), 9, 4};
    s.behaviour_logprobs = {-0.5f, -1.25f, -0.125f * static_cast<float>(g + 1)};
    s.reward = 0.5f * static_cast<float>(g);
    s.version_spans = {{0, version}};
    r.samples.push_back(std::move(s));
  }
  return r;
}

inline TaskUnit random_task(std::mt19937& rng) {
  TaskUnit t;
  t.task_id = "task-" + std::to_string(rng() % 100000);
  t.attempt = rng() % 4;
  t.group_size = 1 + rng() % 16;
  for (int i = 0, n = 1 + rng() % 50; i < n; ++i) t.prompt_ids.push_back(static_cast<int32_t>(rng() % 150000));
  t.prompt_text = "What is " + std::to_string(rng() % 1000) + " + 7?";
  t.reference = std::to_string(rng() % 1000);
  t.created_unix_ms = 1700000000000 + rng() % 1000000;
  t.cursor = rng();
  return t;
}

inline ExperienceRecord random_record(std::mt19937& rng) {
  std::uniform_real_distribution<float> lp(-8.0f, -0.01f);
  ExperienceRecord r;
  r.task_id = "task-" + std::to_string(rng() % 100000);
  r.attempt = rng() % 3;
  r.worker_id = "worker-" + std::to_string(rng() % 8);
  r.cursor = rng();
  r.leased_unix_ms = 1700000000000 + rng() % 1000;
  r.finished_unix_ms = r.leased_unix_ms + 500;
  r.generate_seconds = 0.25 + (rng() % 100) / 100.0;
  r.reward_seconds = 0.01;
  for (int i = 0, n = 1 + rng() % 6; i < n; ++i) {
    Sample s;
    for (int k = 0, m = 1 + rng() % 20; k < m; ++k) s.prompt_tokens.push_back(static_cast<int32_t>(rng() % 1000));
    int len = 3 + rng() % 40;
    for (int k = 0; k < len; ++k) {
      s.response_tokens.push_back(static_cast<int32_t>(rng() % 1000));
      s.behaviour_logprobs.push_back(lp(rng));
    }
    s.reward = lp(rng) + 5.0f;
    s.version_spans = {{0, 10}, {static_cast<uint32_t>(1 + rng() % (len - 1)), 11}};
    s.finish_reason = static_cast<FinishReason>(rng() % 3);
    s.generate_seconds = 0.1 * (1 + rng() % 9);
    r.samples.push_back(std::move(s));
  }
  return r;
}

inline void expect_equal(const ExperienceRecord& a, const ExperienceRecord& b) {
  EXPECT_EQ(a.task_id, b.task_id);
  EXPECT_EQ(a.attempt, b.attempt);
  EXPECT_EQ(a.worker_id, b.worker_id);
  EXPECT_EQ(a.cursor, b.cursor);
  EXPECT_EQ(a.leased_unix_ms, b.leased_unix_ms);
  EXPECT_EQ(a.finished_unix_ms, b.finished_unix_ms);
  EXPECT_EQ(a.generate_seconds, b.generate_seconds);
  ASSERT_EQ(a.samples.size(), b.samples.size());
  for (size_t i = 0; i < a.samples.size(); ++i) {
    EXPECT_EQ(a.samples[i].prompt_tokens, b.samples[i].prompt_tokens);
    EXPECT_EQ(a.samples[i].response_tokens, b.samples[i].response_tokens);
    EXPECT_EQ(a.samples[i].behaviour_logprobs, b.samples[i].behaviour_logprobs);
    EXPECT_EQ(a.samples[i].reward, b.samples[i].reward);
    EXPECT_EQ(a.samples[i].version_spans, b.samples[i].version_spans);
    EXPECT_EQ(a.samples[i].finish_reason, b.samples[i].finish_reason);
    EXPECT_EQ(a.samples[i].generate_seconds, b.samples[i].generate_seconds);
  }
}

}  // namespace moerl::runtime
