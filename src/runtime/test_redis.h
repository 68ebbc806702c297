// Test-only: a redis-server (loopback port, AOF always) in a fresh temp dir, stopped and the
// dir removed when it goes away (ScratchRedis), and RedisTest, the fixture that gives each
// test its own. Header-only, for *_test.cc; links moerl_runtime_testing (RedisServer).
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <memory>
#include <string>

#include "base/error.h"
#include "base/files.h"
#include "runtime/redis_server.h"

namespace moerl::runtime {

class ScratchRedis {
 public:
  ScratchRedis() {
    char tmpl[] = "/tmp/moerl-runtime-redis-XXXXXX";
    char* dir = mkdtemp(tmpl);
    if (dir == nullptr) throw Error("mkdtemp " + std::string(tmpl) + " failed", "check that /tmp is writable");
    dir_ = dir;
    try {
      server_ = std::make_unique<RedisServer>(RedisServer::start(dir_, Deadline::after_seconds(15)));
    } catch (...) {
      remove_dir();
      throw;
    }
  }
  ~ScratchRedis() {
    server_.reset();
    remove_dir();
  }
  ScratchRedis(const ScratchRedis&) = delete;
  ScratchRedis& operator=(const ScratchRedis&) = delete;

  RedisServer& server() { return *server_; }
  std::string url() const { return server_->url(); }

 private:
  void remove_dir() {
    try {
      remove_tree(dir_);
    } catch (const Error&) {
    }
  }
  std::string dir_;
  std::unique_ptr<RedisServer> server_;
};

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    redis_ = std::make_unique<ScratchRedis>();
    server_ = &redis_->server();
    url_ = redis_->url();
  }
  void TearDown() override { redis_.reset(); }
  std::string url_;
  RedisServer* server_ = nullptr;  // owned by redis_

 private:
  std::unique_ptr<ScratchRedis> redis_;
};

}  // namespace moerl::runtime
