// `moerl bench store`: upload and download one large object against an S3 endpoint with
// moerl's S3Store and with the AWS CLI (`aws s3 cp`) in the same run, plus the local disk's
// copy bandwidth as the ceiling (the test server stores objects on the same disk). Each
// transfer is timed `repeats` times; the median is reported. Downloads are checked by sha256.
//
//   StoreBenchConfig c; c.endpoint = "http://127.0.0.1:9000"; c.size_mib = 1024;
//   StoreBenchResult r = run_store_bench(c);   // r.to_json(), print_store_bench(r)
// Not thread-safe (one bench at a time). Failures: moerl::Error (endpoint down, aws missing).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace moerl::store {

struct StoreBenchConfig {
  std::string endpoint;              // required: http(s)://host:port of the S3 endpoint
  std::string bucket = "moerl-test";
  uint64_t size_mib = 1024;
  uint64_t part_size_mib = 16;
  int concurrency = 8;
  int repeats = 1;
  std::string aws = "aws";           // AWS CLI executable; "" skips the baseline
  std::string tmp_dir;               // "" -> the system temp directory
};

struct Transfer {
  double upload_mbps = 0, download_mbps = 0;  // MB/s (1e6 bytes), medians
  double upload_s = 0, download_s = 0;
};

struct StoreBenchResult {
  StoreBenchConfig config;
  uint64_t bytes = 0;
  Transfer moerl;
  Transfer aws_cli;
  bool has_aws = false;
  std::string aws_version;
  double local_copy_mbps = 0;  // disk read + write + fsync of the same file: the ceiling
  nlohmann::json to_json() const;
};

StoreBenchResult run_store_bench(const StoreBenchConfig& config);
void print_store_bench(const StoreBenchResult& r);

}  // namespace moerl::store
