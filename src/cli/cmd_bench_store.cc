// `moerl bench store`: flags -> store::StoreBenchConfig; prints the table or one JSON object.
#include <cstdio>

#include "cli/bench.h"
#include "store/store_bench.h"

namespace moerl::cli {

static int run_bench_store(Args& a) {
  if (a.flag("--help") || a.flag("-h")) {
    std::printf(
        "usage: moerl bench store --endpoint URL [--bucket moerl-test] [--size-mib 1024] [--part-size-mib 16]\n"
        "         [--concurrency 8] [--repeats 1] [--aws aws] [--json]\n"
        "Uploads and downloads one object of --size-mib with moerl's S3 client and with `aws s3 cp`\n"
        "(--aws '' skips it) on the same endpoint, and copies the file locally as the disk ceiling;\n"
        "reports median MB/s. Credentials come from the AWS chain (e.g. AWS_ACCESS_KEY_ID).\n"
        "scripts/bench-store.sh starts the loopback S3 test server and runs this against it.\n");
    return 0;
  }
  store::StoreBenchConfig c;
  c.endpoint = a.required("--endpoint");
  c.bucket = a.value_or("--bucket", c.bucket);
  c.size_mib = static_cast<uint64_t>(a.integer("--size-mib", static_cast<int64_t>(c.size_mib)));
  c.part_size_mib = static_cast<uint64_t>(a.integer("--part-size-mib", static_cast<int64_t>(c.part_size_mib)));
  c.concurrency = static_cast<int>(a.integer("--concurrency", c.concurrency));
  c.repeats = static_cast<int>(a.integer("--repeats", c.repeats));
  c.aws = a.value_or("--aws", c.aws);
  const bool json = a.flag("--json");
  a.finish();
  store::StoreBenchResult r = store::run_store_bench(c);
  if (json) {
    std::printf("%s\n", r.to_json().dump(2).c_str());
  } else {
    store::print_store_bench(r);
  }
  return 0;
}

MOERL_BENCH("store", "S3 object upload/download MB/s, moerl vs `aws s3 cp`, same endpoint", run_bench_store);

}  // namespace moerl::cli
