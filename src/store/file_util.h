// POSIX file helpers shared by the store backends: full reads/writes that retry on EINTR and
// short counts, directory fsync, and kIo errors that name the path and the store.
// Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "base/error.h"

namespace moerl::store {

Error io_error(const std::string& what, const std::string& path, int err, const std::string& store_uri);
void write_all(int fd, const char* data, size_t size, const std::string& path);
void pwrite_all(int fd, const char* data, size_t size, uint64_t offset, const std::string& path);
void pread_all(int fd, char* data, size_t size, uint64_t offset, const std::string& path);
std::string read_all(int fd, const std::string& path);
// Copies the file at src into fd (in 1 MiB chunks, or copy_file_range when possible).
void copy_file_to_fd(const std::string& src, int fd, const std::string& fd_path);
void fsync_dir(const std::string& dir);
uint64_t file_size(const std::string& path);  // throws kNotFound/kIo naming path

}  // namespace moerl::store
