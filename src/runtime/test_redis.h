// Test-only fixture: each test gets its own redis-server (loopback port, AOF always) in a
// fresh temp dir, stopped and removed at teardown. Header-only, for runtime's *_test.cc.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "base/error.h"
#include "base/files.h"
#include "runtime/redis_server.h"

namespace moerl::runtime {

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/moerl-runtime-redis-XXXXXX";
    char* dir = mkdtemp(tmpl);
    ASSERT_NE(dir, nullptr);
    dir_ = dir;
    server_ = std::make_unique<RedisServer>(RedisServer::start(dir_, Deadline::after_seconds(15)));
    url_ = server_->url();
  }
  void TearDown() override {
    server_.reset();
    try {
      remove_tree(dir_);
    } catch (const Error&) {
    }
  }
  std::string dir_;
  std::string url_;
  std::unique_ptr<RedisServer> server_;
};

}  // namespace moerl::runtime
