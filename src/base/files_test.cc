// remove_tree: nested trees go, links are removed without touching their targets, a missing
// path is fine, an unremovable entry is an error naming it; ScratchDir cleans up after itself.
#include "base/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "base/error.h"

namespace fs = std::filesystem;

namespace moerl {
namespace {

void touch(const fs::path& p) { std::ofstream(p) << "x"; }

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
