// AtomicFile / write_file_atomic: replace or keep, never half, no temp left behind;
// remove_tree: nested trees go, links are removed without touching their targets, a missing
// path is fine, an unremovable entry is an error naming it; ScratchDir cleans up after itself.
#include "base/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "base/error.h"

namespace fs = std::filesystem;

namespace moerl {
namespace {

void touch(const fs::path& p) { std::ofstream(p) << "x"; }

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicFile, WritesAndReplacesLeavingNoTemp) {
  ScratchDir work("moerl-files-test");
  const fs::path p = fs::path(work.path()) / "a.json";
  write_file_atomic(p.string(), "first");
  EXPECT_EQ(slurp(p), "first");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 % 251);
  write_file_atomic(p.string(), big);
  EXPECT_EQ(slurp(p), big);
  EXPECT_EQ(names_in(work.path()), std::vector<std::string>{"a.json"});
}

TEST(AtomicFile, UncommittedKeepsTheOldFile) {
  ScratchDir work("moerl-files-test");
  const fs::path p = fs::path(work.path()) / "w.bin";
  write_file_atomic(p.string(), "old");
  std::string temp;
  try {
    AtomicFile f(p.string());
    temp = fs::path(f.temp_path()).filename().string();
    f.write("new, but never committed");
    EXPECT_TRUE(fs::exists(f.temp_path()));
    throw std::runtime_error("writer failed");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(slurp(p), "old");
  EXPECT_TRUE(is_atomic_temp_name(temp)) << temp;
  EXPECT_EQ(temp.rfind(".w.bin.moerl-tmp-", 0), 0u) << temp;
  EXPECT_EQ(names_in(work.path()), std::vector<std::string>{"w.bin"});
}

TEST(AtomicFile, StreamsThroughFdAndCommitsIfAbsent) {
  ScratchDir work("moerl-files-test");
  const fs::path p = fs::path(work.path()) / "once";
  AtomicFile first(p.string());
  ASSERT_EQ(::pwrite(first.fd(), "abcd", 4, 0), 4);
  first.write("ef");  // NOTE: pwrite leaves the offset at 0, so this overwrites "ab"
  EXPECT_TRUE(first.commit_if_absent());
  EXPECT_EQ(slurp(p), "efcd");
  AtomicFile second(p.string());
  second.write("other");
  EXPECT_FALSE(second.commit_if_absent());
  EXPECT_EQ(slurp(p), "efcd");
  EXPECT_EQ(names_in(work.path()), std::vector<std::string>{"once"});
}

TEST(AtomicFile, ParentDirsAndMode) {
  ScratchDir work("moerl-files-test");
  const fs::path p = fs::path(work.path()) / "x" / "y" / "secret";
  try {
    write_file_atomic(p.string(), "s");
    ADD_FAILURE() << "expected an error for the missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(e.message().find(p.string()), std::string::npos) << e.what();
    EXPECT_NE(e.hint().find("directory"), std::string::npos) << e.hint();
  }
  write_file_atomic(p.string(), "s", {.mode = 0600, .parent_dirs = ParentDirs::kCreate});
  EXPECT_EQ(slurp(p), "s");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_THROW(write_file_atomic(work.path() + "/", "x"), Error);
}

TEST(AtomicFile, TempNames) {
  EXPECT_TRUE(is_atomic_temp_name(".b.moerl-tmp-123-0-7"));
  EXPECT_FALSE(is_atomic_temp_name("b.moerl-tmp-123-0-7"));
  EXPECT_FALSE(is_atomic_temp_name(".hidden"));
  EXPECT_FALSE(is_atomic_temp_name(""));
  EXPECT_EQ(atomic_temp_target(".b.moerl-tmp-123-0-7"), "b");
  EXPECT_EQ(atomic_temp_target(".a.b.moerl-tmp-1"), "a.b");
  EXPECT_EQ(atomic_temp_target("b"), "");
}

TEST(RemoveTree, RemovesNestedTreeAndLinksButNotLinkTargets) {
  ScratchDir outside("moerl-files-test");
  const fs::path keep = fs::path(outside.path()) / "keep";
  fs::create_directories(keep);
  touch(keep / "precious");
  ScratchDir work("moerl-files-test");
  const fs::path root = fs::path(work.path()) / "tree";
  fs::create_directories(root / "a" / "b" / "c");
  touch(root / "a" / "f1");
  touch(root / "a" / "b" / "c" / "f2");
  fs::create_directory_symlink(keep, root / "a" / "link");
  remove_tree(root.string());
  EXPECT_FALSE(fs::exists(root));
  EXPECT_TRUE(fs::exists(keep / "precious"));
  remove_tree(root.string());  // already gone: no error
  remove_tree((root / "never").string());
}

TEST(RemoveTree, PlainFile) {
  ScratchDir work("moerl-files-test");
  const fs::path f = fs::path(work.path()) / "f";
  touch(f);
  remove_tree(f.string());
  EXPECT_FALSE(fs::exists(f));
}

TEST(RemoveTree, UnremovableEntryNamesIt) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  ScratchDir work("moerl-files-test");
  const fs::path locked = fs::path(work.path()) / "locked";
  fs::create_directories(locked);
  touch(locked / "inner");
  ::chmod(locked.c_str(), 0500);
  try {
    remove_tree(locked.string());
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((locked / "inner").string()), std::string::npos) << e.what();
  }
  ::chmod(locked.c_str(), 0700);
}

TEST(ScratchDir, FreshAndRemoved) {
  std::string path;
  {
    ScratchDir a("moerl-files-test"), b("moerl-files-test");
    path = a.path();
    EXPECT_NE(a.path(), b.path());
    EXPECT_TRUE(fs::is_directory(path));
    fs::create_directories(fs::path(path) / "x" / "y");
    touch(fs::path(path) / "x" / "y" / "z");
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace moerl
