// TensorBoard event files read back by the test's own decoder (io/tb/test_event_reader.h):
// framing and CRCs, the version event's bytes against TensorBoard's field numbers written out
// by hand, and every scalar with its step, tag and float32 value.
#include "io/tb/event_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "base/error.h"
#include "io/tb/test_event_reader.h"

namespace moerl::tb {
namespace {

namespace fs = std::filesystem;

std::string temp_dir(const std::string& tag) {
  fs::path p = fs::path(::testing::TempDir()) / ("tb-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p.string();
}

TEST(TbEvents, MaskedCrcMatchesTheReference) {
  // CRC-32C("123456789") = 0xE3069283, masked per TFRecord.
  const uint32_t c = 0xE3069283u;
  EXPECT_EQ(masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xa282ead8u);
  std::mt19937 rng(5);
  std::string s(1000, '\0');
  for (char& ch : s) ch = static_cast<char>(rng());
  EXPECT_EQ(masked_crc32c(s.data(), s.size()),
            testing::reference_masked(reinterpret_cast<const unsigned char*>(s.data()), s.size()));
}

TEST(TbEvents, FileNameVersionEventAndScalarsReadBack) {
  const std::string dir = temp_dir("write");
  const double t0 = 1700000000.25;
  std::vector<std::vector<std::pair<std::string, double>>> rows;
  {
    EventWriter w(dir + "/tb", t0);
    char host[256] = {0};
    ::gethostname(host, sizeof(host) - 1);
    EXPECT_EQ(w.path(), dir + "/tb/events.out.tfevents.1700000000." + std::string(host));
    std::mt19937 rng(9);
    std::normal_distribution<double> n(0, 3);
    for (int step = 1; step <= 25; ++step) {
      rows.push_back({{"rl/reward", n(rng)}, {"rl/loss", std::exp(n(rng))}, {"rl/reward_extra/format", step * 0.1}});
      if (step == 7) rows.back().push_back({"rl/kl", NAN});
      w.add_scalars(step, rows.back(), t0 + step);
    }
  }
  std::vector<std::string> recs = testing::read_records(dir + "/tb/" + fs::directory_iterator(dir + "/tb")->path().filename().string());
  ASSERT_EQ(recs.size(), 26u);
  // The version event, encoded by hand from TensorBoard's event.proto: wall_time = 1 (fixed64),
  // file_version = 3 (length-delimited).
  std::string want = "\x09";
  double wt = t0;
  want.append(reinterpret_cast<const char*>(&wt), 8);  // little-endian on x86-64 and arm64
  want += "\x1a\x0d" "brain.Event:2";
  EXPECT_EQ(recs[0], want);

  std::vector<Event> ev = testing::read_events(fs::directory_iterator(dir + "/tb")->path().string());
  ASSERT_EQ(ev.size(), 26u);
  EXPECT_EQ(ev[0].file_version(), kFileVersion);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Event& e = ev[i + 1];
    EXPECT_EQ(e.step(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(e.wall_time(), t0 + i + 1);
    ASSERT_TRUE(e.has_summary());
    ASSERT_EQ(e.summary().value_size(), static_cast<int>(rows[i].size()));
    for (size_t k = 0; k < rows[i].size(); ++k) {
      const auto& v = e.summary().value(static_cast<int>(k));
      EXPECT_EQ(v.tag(), rows[i][k].first);
      ASSERT_TRUE(v.has_simple_value());
      if (std::isnan(rows[i][k].second)) {
        EXPECT_TRUE(std::isnan(v.simple_value()));
      } else {
        EXPECT_EQ(v.simple_value(), static_cast<float>(rows[i][k].second)) << v.tag() << " at step " << i + 1;
      }
    }
  }
  fs::remove_all(dir);
}

TEST(TbEvents, UnwritableDirectoryIsAnIoError) {
  try {
    EventWriter w("/proc/moerl-no-such-dir/tb");
    ADD_FAILURE() << "wrote into /proc";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("/proc/moerl-no-such-dir/tb"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace moerl::tb
