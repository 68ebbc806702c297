// Weight versions through shared memory: a version read in another process's way (a fresh
// mapping) equals the trainer's state; a version whose file was rewritten, or is being
// rewritten, is refused as replaced (kNotFound, so the worker stages the newest), never read
// as a mix; a damaged file or a bad location is a clear error.
#include "rollout/shared_weights.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/files.h"
#include "model/test_util.h"

namespace moerl::rollout {
namespace {

// The code of the Error `fn` throws; nullopt when it throws none.
std::optional<ErrorCode> code_of(const std::function<void()>& fn, std::string* message) {
  try {
    fn();
  } catch (const Error& e) {
    *message = e.what();
    return e.code();
  }
  *message = "";
  return std::nullopt;
}

TEST(SharedWeights, AVersionReadsBackEqualInAnotherProcessAndNamesItsConfig) {
  ScratchDir tmp("shared-weights");
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 3);
  SharedWeightsWriter w(tmp.path(), "t");
  const std::string loc = w.put(4, m);
  EXPECT_TRUE(is_shared_location(loc)) << loc;
  // A reader in a child process (as a rollout worker is): compares every tensor, exits 0 if equal.
  const pid_t pid = ::fork();
  if (pid == 0) {
    SharedWeights s = read_shared_weights(loc);
    bool same = s.version == 4 && s.params.size() == m.state().size() &&
                s.config.num_experts == m.config().num_experts;
    for (const auto& [name, t] : m.state()) same = same && s.params.count(name) && at::equal(s.params.at(name), t);
    ::_exit(same ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  // The files (two copies of the weights in memory) go with their writer.
  {
    SharedWeightsWriter gone(tmp.path(), "gone");
    gone.put(1, m);
    gone.put(2, m);
    EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/moerl-weights-gone-0"));
    EXPECT_TRUE(std::filesystem::exists(tmp.path() + "/moerl-weights-gone-1"));
  }
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/moerl-weights-gone-0"));
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/moerl-weights-gone-1"));

  // bfloat16 (the GPU trainer's dtype) and a filter (an EP rank's tensors).
  model::Model f = model::init_random(model::testing::tiny_qwen3(), 4);
  model::Model b(f.config(), f.state(), {.dtype = at::kBFloat16});
  SharedWeights s = read_shared_weights(w.put(5, b), [](const std::string& n) { return n.find("experts") == std::string::npos; });
  for (const auto& [name, t] : b.state()) {
    if (name.find("experts") != std::string::npos) {
      EXPECT_EQ(s.params.count(name), 0u) << name;
    } else {
      ASSERT_EQ(s.params.count(name), 1u) << name;
      EXPECT_EQ(s.params.at(name).scalar_type(), at::kBFloat16);
      EXPECT_TRUE(at::equal(s.params.at(name), t)) << name;
    }
  }
}

TEST(SharedWeights, AReplacedOrHalfWrittenVersionIsRefusedAsReplaced) {
  ScratchDir tmp("shared-weights");
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 3);
  SharedWeightsWriter w(tmp.path(), "t");
  const std::string v1 = w.put(1, m);
  const std::string v2 = w.put(2, m);
  w.put(3, m);  // the file of version 1 (3 % 2 == 1 % 2) now holds version 3
  std::string msg;
  EXPECT_EQ(code_of([&] { read_shared_weights(v1); }, &msg), ErrorCode::kNotFound);
  EXPECT_NE(msg.find("replaced by version 3"), std::string::npos) << msg;
  EXPECT_EQ(code_of([&] { read_shared_weights(v2); }, &msg), std::nullopt) << msg;

  // A writer inside the file (its sequence counter odd): the reader backs off.
  const std::string file = v2.substr(std::string("shared:").size(), v2.rfind("#v") - std::string("shared:").size());
  {
    std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
    uint64_t seq = 0;
    f.seekg(8);
    f.read(reinterpret_cast<char*>(&seq), 8);
    seq |= 1;
    f.seekp(8);
    f.write(reinterpret_cast<const char*>(&seq), 8);
  }
  EXPECT_EQ(code_of([&] { read_shared_weights(v2); }, &msg), ErrorCode::kNotFound);
  EXPECT_NE(msg.find("being rewritten"), std::string::npos) << msg;
  // The next write of that file completes it again.
  EXPECT_EQ(code_of([&] { read_shared_weights(w.put(4, m)); }, &msg), std::nullopt) << msg;
}

TEST(SharedWeights, DamagedFilesAndBadLocationsAreClearErrors) {
  ScratchDir tmp("shared-weights");
  std::string msg;
  std::ofstream(tmp.path() + "/junk") << std::string(200, 'x');
  EXPECT_EQ(code_of([&] { read_shared_weights("shared:" + tmp.path() + "/junk#v1"); }, &msg), ErrorCode::kIo);
  EXPECT_NE(msg.find("is not a weights file"), std::string::npos) << msg;
  std::ofstream(tmp.path() + "/short") << "x";
  EXPECT_EQ(code_of([&] { read_shared_weights("shared:" + tmp.path() + "/short#v1"); }, &msg), ErrorCode::kIo);
  EXPECT_NE(msg.find("too short"), std::string::npos) << msg;
  EXPECT_EQ(code_of([&] { read_shared_weights("shared:" + tmp.path() + "/missing#v1"); }, &msg), ErrorCode::kIo);
  EXPECT_EQ(code_of([&] { read_shared_weights("shared:/x#vnine"); }, &msg), ErrorCode::kInvalidInput);
  EXPECT_NE(msg.find("shared:<file>#v<version>"), std::string::npos) << msg;
  EXPECT_EQ(code_of([&] { SharedWeightsWriter(tmp.path() + "/no/such/dir", "t"); }, &msg), ErrorCode::kInvalidInput);
  EXPECT_NE(msg.find("shared_weights_dir"), std::string::npos) << msg;
}

}  // namespace
}  // namespace moerl::rollout

namespace moerl::rollout {
namespace {

// The writer keeps each file mapped between versions; a file removed (a cleanup of /dev/shm)
// or replaced under it is made anew, so the next version of that slot is still readable.
TEST(SharedWeights, AFileRemovedUnderTheWriterIsMadeAnewForTheNextVersion) {
  ScratchDir tmp("shared-weights-removed");
  model::Model m = model::init_random(model::testing::tiny_qwen3(), 5);
  SharedWeightsWriter w(tmp.path(), "r");
  w.put(1, m);
  w.put(2, m);
  EXPECT_FALSE(w.pinned());  // a CPU model: nothing to page-lock for
  const std::string slot0 = tmp.path() + "/moerl-weights-r-0";
  ASSERT_TRUE(std::filesystem::remove(slot0));
  model::Model m2 = model::init_random(model::testing::tiny_qwen3(), 6);
  const std::string loc = w.put(4, m2);  // slot 0 again
  ASSERT_TRUE(std::filesystem::exists(slot0));
  SharedWeights s = read_shared_weights(loc);
  EXPECT_EQ(s.version, 4u);
  for (const auto& [name, t] : m2.state()) EXPECT_TRUE(at::equal(s.params.at(name), t)) << name;
  // Reused in place (same file, same size): the version after next reads back too.
  const std::string loc6 = w.put(6, m);
  s = read_shared_weights(loc6);
  for (const auto& [name, t] : m.state()) EXPECT_TRUE(at::equal(s.params.at(name), t)) << name;
}

}  // namespace
}  // namespace moerl::rollout
