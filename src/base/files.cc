// remove_tree walks with opendir/readdir and removes with unlink/rmdir (lstat, so links are
// removed rather than followed); ScratchDir makes its directory with mkdtemp.
#include "base/files.h"

#include <cstdio>
#include <fstream>

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "base/log.h"

namespace moerl {
namespace {

Error io_error(const std::string& what, const std::string& path, int err) {
  return Error("cannot " + what + " '" + path + "': " + std::strerror(err),
               "check permissions on that path and that no other process holds it", ErrorCode::kIo);
}

void remove_entry(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw io_error("stat", path, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) throw io_error("remove", path, errno);
    return;
  }
  std::vector<std::string> children;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) children.push_back(e->d_name);
    }
    ::closedir(d);
  } else if (errno != ENOENT) {
    throw io_error("list", path, errno);
  }
  for (const std::string& c : children) remove_entry(path + "/" + c);
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT) throw io_error("remove directory", path, errno);
}

}  // namespace

void remove_tree(const std::string& path) {
  if (path.empty()) throw Error("remove_tree: empty path", "pass the directory to remove", ErrorCode::kInternal);
  remove_entry(path);
}

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = std::filesystem::temp_directory_path().string() + "/" + prefix + "-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw io_error("create scratch directory", tmpl, errno);
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  try {
    remove_tree(path_);
  } catch (const std::exception& e) {
    MOERL_LOG(WARN) << "scratch directory left behind: " << e.what();
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc | std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw Error("cannot write " + tmp, "check free space and permissions", ErrorCode::kIo);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw Error("cannot rename " + tmp + " to " + path, "check permissions", ErrorCode::kIo);
  }
}

}  // namespace moerl
