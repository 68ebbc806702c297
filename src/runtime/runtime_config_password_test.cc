// Where the Redis password comes from (runtime.queue_password_file, the URL,
// MOERL_REDIS_PASSWORD) and where it must never appear: URL parse errors, to_json, the config
// text written to the run dir.
#include <stdlib.h>

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/files.h"
#include "runtime/redis_server.h"
#include "runtime/runtime_config.h"
#include "runtime/test_records.h"

namespace moerl::runtime {
namespace {

RuntimeConfig parse(const std::string& toml) {
  ConfigDoc doc = ConfigDoc::parse(toml, "test.toml");
  return RuntimeConfig::from_config(doc.root().table("runtime"));
}

std::string error_of(const std::string& toml) {
  try {
    parse(toml);
  } catch (const Error& e) {
    return std::string(e.what()) + " HINT: " + e.hint();
  }
  return "(accepted)";
}

// Sets MOERL_REDIS_PASSWORD for one scope.
struct EnvPassword {
  explicit EnvPassword(const char* value) { ::setenv("MOERL_REDIS_PASSWORD", value, 1); }
  ~EnvPassword() { ::unsetenv("MOERL_REDIS_PASSWORD"); }
};

struct TempFile {
  std::string path = "/tmp/moerl-pw-test-" + std::to_string(::getpid());
  explicit TempFile(const std::string& text) { write_file_atomic(path, text, {.mode = 0600}); }
  ~TempFile() { ::unlink(path.c_str()); }
};

TEST(RedisPassword, FromTheFileThenTheUrlThenTheEnvironment) {
  TempFile file("from-file\n");
  EnvPassword env("from-env");
  EXPECT_EQ(parse("[runtime]\nqueue_url = \"redis://h:1/0\"\nqueue_password_file = \"" + file.path + "\"\n")
                .redis_url().password,
            "from-file");  // the trailing newline of a Secret file is not part of it
  EXPECT_EQ(parse("[runtime]\nqueue_url = \"redis://:from-url@h:1/0\"\n").redis_url().password, "from-url");
  RuntimeConfig c = parse("[runtime]\nqueue_url = \"redis://h:1/0\"\n");
  EXPECT_EQ(c.redis_url().password, "from-env");
  EXPECT_EQ(c.redis_url().host, "h");
  EXPECT_EQ(c.to_json()["queue_url"], "redis://:***@h:1/0");
  EXPECT_EQ(c.to_json().dump().find("from-env"), std::string::npos);
}

TEST(RedisPassword, NoPasswordAnywhereMeansNoAuth) {
  ::unsetenv("MOERL_REDIS_PASSWORD");
  EXPECT_EQ(parse("[runtime]\nqueue_url = \"redis://h:1/0\"\n").redis_url().password, "");
}

TEST(RedisPassword, BadSourcesAreNamedWithoutShowingThePassword) {
  TempFile file("pw\n");
  std::string e = error_of("[runtime]\nqueue_url = \"redis://:s3cret@h:1/0\"\nqueue_password_file = \"" + file.path + "\"\n");
  EXPECT_NE(e.find("runtime.queue_password_file"), std::string::npos) << e;
  EXPECT_NE(e.find("two passwords"), std::string::npos) << e;
  EXPECT_EQ(e.find("s3cret"), std::string::npos) << e;
  e = error_of("[runtime]\nqueue_url = \"redis://h:1/0\"\nqueue_password_file = \"/nonexistent/pw\"\n");
  EXPECT_NE(e.find("runtime.queue_password_file = \"/nonexistent/pw\" cannot be read"), std::string::npos) << e;
  TempFile empty("\n");
  e = error_of("[runtime]\nqueue_url = \"redis://h:1/0\"\nqueue_password_file = \"" + empty.path + "\"\n");
  EXPECT_NE(e.find("is empty"), std::string::npos) << e;
  e = error_of("[runtime]\nqueue_password_file = \"" + file.path + "\"\n");
  EXPECT_NE(e.find("is not Redis"), std::string::npos) << e;
}

TEST(RedisPassword, UrlParseErrorsRedactThePassword) {
  for (const std::string& url : {"redis://:s3cret@h:99999/0", "redis://s3cret@h:1/zz", "redis://:s3cret@", "rediss://:s3cret@h"}) {
    try {
      parse_redis_url(url);
      FAIL() << "accepted " << redact_url(url);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find("s3cret"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("***"), std::string::npos) << e.what();
    }
  }
  std::string e = error_of("[runtime]\nqueue_url = \"redis://:s3cret@h:0/0\"\n");
  EXPECT_EQ(e.find("s3cret"), std::string::npos) << e;
}

TEST(RedisPassword, TheConfigWrittenToTheRunDirHasNoPassword) {
  const std::string toml = "[runtime]\nqueue_url = \"redis://:s3cret@h:1/0\"\nmode = \"async\"\n";
  ConfigDoc doc = ConfigDoc::parse(toml, "test.toml", {"runtime.namespace=job1"});
  const std::string text = doc.to_toml();
  RuntimeConfig c = RuntimeConfig::from_config(doc.root().table("runtime"));
  std::string written = without_queue_password(text, c);
  EXPECT_EQ(written.find("s3cret"), std::string::npos) << written;
  EXPECT_NE(written.find("redis://h:1/0"), std::string::npos) << written;
  // Read back, it names the same server; the password then comes from the environment.
  EnvPassword env("s3cret");
  RuntimeConfig back = parse(written);
  EXPECT_EQ(back.redis_url().host, "h");
  EXPECT_EQ(back.redis_url().password, "s3cret");
  EXPECT_EQ(back.ns, "job1");
  EXPECT_EQ(without_queue_password(text, parse("")), text);  // nothing to remove
  EXPECT_EQ(strip_url_password("redis://u:p@ss@h:1/0"), "redis://h:1/0");
}

TEST(RedisPassword, BackendsAuthenticateWithThePasswordFromTheFile) {
  std::string dir = "/tmp/moerl-pw-redis-" + std::to_string(::getpid());
  remove_tree(dir);
  std::filesystem::create_directories(dir);
  {
    RedisServer server = RedisServer::start(dir, Deadline::after_seconds(15), 0, "file-pw");
    TempFile file("file-pw\n");
    ::unsetenv("MOERL_REDIS_PASSWORD");
    const std::string url = "redis://127.0.0.1:" + std::to_string(server.port()) + "/0";
    RuntimeBackends b = open_backends(
        parse("[runtime]\nqueue_url = \"" + url + "\"\nqueue_password_file = \"" + file.path + "\"\n"));
    b.queue->enqueue(make_task("a", 1), Deadline::after_seconds(5));
    EXPECT_EQ(b.queue->lease("w", 1, 10, Deadline::after_seconds(5)).size(), 1u);
    // Without it the server refuses (NOAUTH), and the error names the server, not the password.
    RuntimeBackends none = open_backends(parse("[runtime]\nqueue_url = \"" + url + "\"\n"));
    try {
      none.queue->enqueue(make_task("b", 1), Deadline::after_seconds(1));
      FAIL() << "a client without the password was served";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("127.0.0.1:" + std::to_string(server.port())), std::string::npos) << e.what();
    }
  }
  remove_tree(dir);
}

}  // namespace
}  // namespace moerl::runtime
