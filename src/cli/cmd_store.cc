// `moerl store ls|cp|rm|cleanup|verify`: object-store operations on URIs (a local path,
// file:///path, s3://bucket/prefix, memory://name). Logic lives in store/transfer.h and
// store/commit.h; this file parses flags and prints.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <ctime>
#include <string>

#include "base/error.h"
#include "cli/command.h"
#include "store/commit.h"
#include "store/transfer.h"

namespace moerl::cli {

static const char* kUsage =
    "usage: moerl store ls URI\n"
    "       moerl store cp [-r] SRC DST\n"
    "       moerl store rm [-r] URI\n"
    "       moerl store cleanup [--grace-s 3600] ROOT_URI   (remove uncommitted shards, abort stale uploads)\n"
    "       moerl store verify COMMIT_URI                   (check every shard against the manifest)\n"
    "URIs: /local/path, file:///path, s3://bucket/prefix, memory://name/prefix.\n"
    "S3: credentials from the AWS chain (env, web identity, container, ~/.aws, IMDS); --endpoint URL\n"
    "    (or AWS_ENDPOINT_URL_S3) for S3-compatible servers; --region R.\n";

static std::string fmt_time(int64_t t) {
  char buf[32];
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

static int run_store(Args& args) {
  if (args.flag("--help") || args.flag("-h")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  bool recursive = args.flag("-r") || args.flag("--recursive");
  double grace = args.number("--grace-s", 3600);
  store::StoreOptions options;
  options.s3.endpoint = args.value_or("--endpoint", "");
  options.s3.region = args.value_or("--region", "");
  std::string sub = args.positional(0, "SUBCOMMAND (ls, cp, rm, cleanup, verify)");

  if (sub == "ls") {
    std::string uri = args.positional(1, "URI");
    args.finish();
    for (const auto& o : store::list_uri(uri, options)) {
      std::printf("%12llu  %s  %s\n", static_cast<unsigned long long>(o.size), fmt_time(o.mtime_unix).c_str(),
                  o.key.c_str());
    }
    return 0;
  }
  if (sub == "cp") {
    std::string src = args.positional(1, "SRC");
    std::string dst = args.positional(2, "DST");
    args.finish();
    store::TransferStats st = store::copy_uri(src, dst, recursive, options);
    std::printf("copied %llu object%s, %.1f MB in %.2f s (%.1f MB/s)\n", static_cast<unsigned long long>(st.objects),
                st.objects == 1 ? "" : "s", static_cast<double>(st.bytes) / 1e6, st.seconds,
                st.seconds > 0 ? static_cast<double>(st.bytes) / 1e6 / st.seconds : 0.0);
    return 0;
  }
  if (sub == "rm") {
    std::string uri = args.positional(1, "URI");
    args.finish();
    uint64_t n = store::remove_uri(uri, recursive, options);
    std::printf("removed %llu object%s\n", static_cast<unsigned long long>(n), n == 1 ? "" : "s");
    return 0;
  }
  if (sub == "cleanup" || sub == "verify") {
    std::string uri = args.positional(1, sub == "cleanup" ? "ROOT_URI" : "COMMIT_URI");
    args.finish();
    store::Location loc = store::locate(uri, options);
    std::string key = loc.key;
    while (!key.empty() && key.back() == '/') key.pop_back();
    if (sub == "cleanup") {
      store::CleanupReport r = store::cleanup(*loc.store, key, grace);
      for (const auto& k : r.removed_objects) std::printf("removed %s\n", k.c_str());
      for (const auto& k : r.aborted_uploads) std::printf("aborted upload of %s\n", k.c_str());
      std::printf("cleanup: %zu objects removed, %zu uploads aborted\n", r.removed_objects.size(), r.aborted_uploads.size());
      return 0;
    }
    store::CommitReader reader = store::CommitReader::open(*loc.store, key);
    uint64_t bytes = 0;
    std::string tmp = std::filesystem::temp_directory_path() / ("moerl-verify-" + std::to_string(::getpid()));
    for (const auto& name : reader.names()) {
      reader.get_file(name, tmp);  // streamed, then checked against size + sha256
      bytes += std::filesystem::file_size(tmp);
      std::filesystem::remove(tmp);
    }
    std::printf("verified %s: %zu shards, %llu bytes, sizes and sha256 match the manifest\n", uri.c_str(),
                reader.names().size(), static_cast<unsigned long long>(bytes));
    return 0;
  }
  throw Error("moerl store: unknown subcommand '" + sub + "'", "use ls, cp, rm, cleanup or verify (see --help)");
}

MOERL_COMMAND("store", "object store: ls, cp, rm (local paths and s3://), cleanup, verify", run_store);

}  // namespace moerl::cli
