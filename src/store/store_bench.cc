// The object-store benchmark: moerl's S3Store vs `aws s3 cp` on the same endpoint and file.
#include "store/store_bench.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>
#include <vector>

#include "base/deadline.h"
#include "base/error.h"
#include "base/files.h"
#include "base/log.h"
#include "base/subprocess.h"
#include "io/checksum.h"
#include "store/file_util.h"
#include "store/s3/s3_store.h"

namespace fs = std::filesystem;

namespace moerl::store {

static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Writes `bytes` of pseudo-random data (xorshift, incompressible) and returns its sha256.
static std::string make_file(const std::string& path, uint64_t bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("create", path, errno, "bench");
  std::vector<uint64_t> buf(1 << 17);  // 1 MiB
  uint64_t x = 0x9E3779B97F4A7C15ull;
  io::Sha256 sha;
  for (uint64_t done = 0; done < bytes;) {
    for (auto& w : buf) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w = x;
    }
    size_t n = static_cast<size_t>(std::min<uint64_t>(bytes - done, buf.size() * 8));
    write_all(fd, reinterpret_cast<const char*>(buf.data()), n, path);
    sha.update(buf.data(), n);
    done += n;
  }
  ::fsync(fd);
  ::close(fd);
  return sha.hex();
}

static double local_copy_seconds(const std::string& src, const std::string& dst) {
  double t0 = now_seconds();
  int out = ::open(dst.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) throw io_error("create", dst, errno, "bench");
  copy_file_to_fd(src, out, dst);
  ::fsync(out);
  ::close(out);
  return now_seconds() - t0;
}

// Runs argv, stdout/stderr appended to a log file; returns (exit status, seconds). A run
// still going after `seconds` is Error(kTimeout) (and is killed).
static std::pair<int, double> run_timed(const std::vector<std::string>& argv, const std::string& log, double seconds) {
  double t0 = now_seconds();
  SpawnOptions o;
  o.stdout_to = Redirect::file(log, FileMode::kAppend);
  o.stderr_to = Redirect::to_stdout();
  int status = Subprocess::spawn(argv, o).wait(Deadline::after_seconds(seconds));
  return {status, now_seconds() - t0};
}

static std::string read_small(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[512] = {0};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string s(buf, n);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

StoreBenchResult run_store_bench(const StoreBenchConfig& c) {
  if (c.endpoint.empty()) {
    throw Error("bench store: --endpoint is required", "start a server with scripts/bench-store.sh, or give an S3 endpoint URL");
  }
  if (c.size_mib == 0 || c.repeats < 1) throw Error("bench store: --size-mib and --repeats must be >= 1", "e.g. --size-mib 1024");
  StoreBenchResult r;
  r.config = c;
  r.bytes = c.size_mib << 20;
  fs::path dir = fs::path(c.tmp_dir.empty() ? fs::temp_directory_path().string() : c.tmp_dir) /
                 ("moerl-bench-store-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      try {
        remove_tree(d);
      } catch (const Error&) {
      }
    }
  } cleanup{dir};
  std::string src = (dir / "object.bin").string(), dst = (dir / "back.bin").string();
  std::string sha = make_file(src, r.bytes);
  double mb = static_cast<double>(r.bytes) / 1e6;

  std::vector<double> copy_s;
  for (int i = 0; i < c.repeats; ++i) copy_s.push_back(local_copy_seconds(src, dst));
  r.local_copy_mbps = mb / median(copy_s);
  fs::remove(dst);

  S3Options o;
  o.endpoint = c.endpoint;
  o.addressing = Addressing::kPath;
  o.part_size = c.part_size_mib << 20;
  o.multipart_threshold = o.part_size;
  o.concurrency = c.concurrency;
  std::string prefix = "bench-" + std::to_string(::getpid());
  s3::S3Store s3("s3://" + c.bucket + "/" + prefix, o);
  std::vector<double> up, down;
  for (int i = 0; i < c.repeats; ++i) {
    double t0 = now_seconds();
    s3.put_file("moerl.bin", src);
    up.push_back(now_seconds() - t0);
    t0 = now_seconds();
    s3.get_file("moerl.bin", dst);
    down.push_back(now_seconds() - t0);
    if (io::sha256_file_hex(dst) != sha) {
      throw Error("bench store: the object moerl downloaded differs from the one it uploaded", "this is a bug; report it",
                  ErrorCode::kInternal);
    }
    fs::remove(dst);
  }
  r.moerl = {mb / median(up), mb / median(down), median(up), median(down)};
  s3.remove("moerl.bin");

  if (!c.aws.empty()) {
    std::string log = (dir / "aws.log").string();
    auto [rc_v, t_v] = run_timed({c.aws, "--version"}, log, 60);
    r.aws_version = read_small(log);
    if (rc_v != 0) {
      throw Error("bench store: `" + c.aws + " --version` failed (exit " + std::to_string(rc_v) + ")",
                  "install the AWS CLI (Debian awscli) or pass --aws '' to skip the baseline");
    }
    std::string url = "s3://" + c.bucket + "/" + prefix + "/aws.bin";
    std::vector<double> aup, adown;
    const double cp_seconds = 120 + static_cast<double>(c.size_mib);  // a 1 MiB/s floor
    for (int i = 0; i < c.repeats; ++i) {
      auto [rc1, t1] = run_timed({c.aws, "--endpoint-url", c.endpoint, "s3", "cp", "--no-progress", src, url}, log, cp_seconds);
      auto [rc2, t2] = run_timed({c.aws, "--endpoint-url", c.endpoint, "s3", "cp", "--no-progress", url, dst}, log, cp_seconds);
      if (rc1 != 0 || rc2 != 0 || fs::file_size(dst) != r.bytes) {
        throw Error("bench store: `aws s3 cp` failed (exit " + std::to_string(rc1) + "/" + std::to_string(rc2) + "): " + read_small(log),
                    "check the endpoint and the AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY the CLI sees");
      }
      aup.push_back(t1);
      adown.push_back(t2);
      fs::remove(dst);
    }
    r.aws_cli = {mb / median(aup), mb / median(adown), median(aup), median(adown)};
    r.has_aws = true;
    s3.remove("aws.bin");
  }
  return r;
}

nlohmann::json StoreBenchResult::to_json() const {
  auto t = [](const Transfer& x) {
    return nlohmann::json{{"upload_MBps", x.upload_mbps}, {"download_MBps", x.download_mbps},
                          {"upload_s", x.upload_s}, {"download_s", x.download_s}};
  };
  nlohmann::json j = {{"bench", "store"},
                      {"endpoint", config.endpoint},
                      {"bytes", bytes},
                      {"repeats", config.repeats},
                      {"part_size_mib", config.part_size_mib},
                      {"concurrency", config.concurrency},
                      {"moerl", t(moerl)},
                      {"local_copy_MBps", local_copy_mbps}};
  if (has_aws) {
    j["aws_cli"] = t(aws_cli);
    j["aws_cli"]["version"] = aws_version;
    j["upload_ratio_moerl_over_aws"] = moerl.upload_mbps / aws_cli.upload_mbps;
    j["download_ratio_moerl_over_aws"] = moerl.download_mbps / aws_cli.download_mbps;
  }
  return j;
}

void print_store_bench(const StoreBenchResult& r) {
  std::printf("object store bench: %.0f MiB object, %s, median of %d\n", static_cast<double>(r.bytes) / (1 << 20),
              r.config.endpoint.c_str(), r.config.repeats);
  std::printf("  %-28s %12s %12s\n", "", "upload MB/s", "download MB/s");
  std::printf("  %-28s %12.1f %12.1f\n", "moerl (S3Store)", r.moerl.upload_mbps, r.moerl.download_mbps);
  if (r.has_aws) {
    std::printf("  %-28s %12.1f %12.1f\n", "aws s3 cp (baseline)", r.aws_cli.upload_mbps, r.aws_cli.download_mbps);
    std::printf("  %-28s %12.2f %12.2f\n", "ratio moerl / aws", r.moerl.upload_mbps / r.aws_cli.upload_mbps,
                r.moerl.download_mbps / r.aws_cli.download_mbps);
  }
  std::printf("  %-28s %12.1f   (read + write + fsync; the server's disk)\n", "local file copy (ceiling)", r.local_copy_mbps);
  if (r.has_aws) std::printf("  aws: %s\n", r.aws_version.c_str());
}

}  // namespace moerl::store
