// Tests for the PNG encoder and the line-chart renderer. The test carries its own small
// PNG reader (chunk CRCs, zlib header/Adler-32, inflate of stored and fixed-Huffman
// blocks, all five row filters) so encoded files are checked by decoding them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <random>
#include <stdexcept>

#include "base/error.h"
#include "base/font.h"
#include "base/plot.h"
#include "base/png.h"

namespace moerl {
namespace {

// ---- test-side decoder -------------------------------------------------------------

class BitReader {
 public:
  BitReader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  uint32_t bits(int count) {  // LSB-first
    uint32_t v = 0;
    for (int i = 0; i < count; ++i) v |= static_cast<uint32_t>(bit()) << i;
    return v;
  }
  int bit() {
    if (pos_ >= n_ * 8) throw std::runtime_error("inflate: out of input");
    int b = (p_[pos_ / 8] >> (pos_ % 8)) & 1;
    ++pos_;
    return b;
  }
  void align() { pos_ = (pos_ + 7) / 8 * 8; }
  size_t byte_pos() const { return pos_ / 8; }

 private:
  const uint8_t* p_;
  size_t n_, pos_ = 0;
};

int fixed_symbol(BitReader& r) {  // Huffman codes arrive MSB-first
  uint32_t c = 0;
  for (int i = 0; i < 7; ++i) c = (c << 1) | r.bit();
  if (c <= 23) return 256 + static_cast<int>(c);
  c = (c << 1) | r.bit();
  if (c >= 0x30 && c <= 0xBF) return static_cast<int>(c - 0x30);
  if (c >= 0xC0 && c <= 0xC7) return 280 + static_cast<int>(c - 0xC0);
  c = (c << 1) | r.bit();
  if (c >= 0x190 && c <= 0x1FF) return 144 + static_cast<int>(c - 0x190);
  throw std::runtime_error("inflate: bad fixed code");
}

std::vector<uint8_t> zlib_inflate(const std::vector<uint8_t>& z) {
  static const int kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                                   31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
  static const int kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                                    2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
  static const int kDistBase[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                                    33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                                    1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
  static const int kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                     6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};
  if (z.size() < 6) throw std::runtime_error("zlib: too short");
  if ((z[0] & 0x0F) != 8 || ((z[0] << 8) | z[1]) % 31 != 0) throw std::runtime_error("zlib: bad header");
  BitReader r(z.data() + 2, z.size() - 6);
  std::vector<uint8_t> out;
  for (bool final = false; !final;) {
    final = r.bit();
    int type = static_cast<int>(r.bits(2));
    if (type == 0) {
      r.align();
      uint32_t len = r.bits(16), nlen = r.bits(16);
      if ((len ^ 0xFFFF) != nlen) throw std::runtime_error("stored: LEN/NLEN mismatch");
      for (uint32_t i = 0; i < len; ++i) out.push_back(static_cast<uint8_t>(r.bits(8)));
    } else if (type == 1) {
      for (;;) {
        int sym = fixed_symbol(r);
        if (sym < 256) {
          out.push_back(static_cast<uint8_t>(sym));
        } else if (sym == 256) {
          break;
        } else {
          int li = sym - 257;
          if (li >= 29) throw std::runtime_error("bad length symbol");
          int len = kLenBase[li] + static_cast<int>(r.bits(kLenExtra[li]));
          uint32_t dc = 0;
          for (int i = 0; i < 5; ++i) dc = (dc << 1) | r.bit();
          if (dc >= 30) throw std::runtime_error("bad distance symbol");
          size_t dist = kDistBase[dc] + r.bits(kDistExtra[dc]);
          if (dist > out.size()) throw std::runtime_error("distance before start");
          for (int i = 0; i < len; ++i) out.push_back(out[out.size() - dist]);
        }
      }
    } else {
      throw std::runtime_error("unsupported block type");
    }
  }
  const uint8_t* a = z.data() + z.size() - 4;
  uint32_t want = (uint32_t{a[0]} << 24) | (uint32_t{a[1]} << 16) | (uint32_t{a[2]} << 8) | a[3];
  if (adler32(out.data(), out.size()) != want) throw std::runtime_error("zlib: Adler-32 mismatch");
  return out;
}

uint32_t be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

struct Decoded {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  std::vector<std::string> chunk_types;
  Rgb at(int x, int y) const {
    const uint8_t* p = &rgb[(static_cast<size_t>(y) * width + x) * 3];
    return {p[0], p[1], p[2]};
  }
};

Decoded decode_png(const std::vector<uint8_t>& f) {
  static const uint8_t kSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (f.size() < 8 || !std::equal(kSig, kSig + 8, f.begin())) throw std::runtime_error("bad signature");
  Decoded d;
  std::vector<uint8_t> idat;
  size_t pos = 8;
  while (pos + 12 <= f.size()) {
    uint32_t len = be32(&f[pos]);
    std::string type(f.begin() + pos + 4, f.begin() + pos + 8);
    if (pos + 12 + len > f.size()) throw std::runtime_error("chunk past end");
    if (crc32(&f[pos + 4], len + 4) != be32(&f[pos + 8 + len])) throw std::runtime_error("CRC of " + type);
    const uint8_t* body = &f[pos + 8];
    d.chunk_types.push_back(type);
    if (type == "IHDR") {
      d.width = static_cast<int>(be32(body));
      d.height = static_cast<int>(be32(body + 4));
      if (body[8] != 8 || body[9] != 2 || body[12] != 0) throw std::runtime_error("not RGB8");
    } else if (type == "IDAT") {
      idat.insert(idat.end(), body, body + len);
    }
    pos += 12 + len;
  }
  if (pos != f.size()) throw std::runtime_error("trailing bytes");
  std::vector<uint8_t> raw = zlib_inflate(idat);
  const size_t stride = static_cast<size_t>(d.width) * 3;
  if (raw.size() != (stride + 1) * d.height) throw std::runtime_error("wrong image data size");
  d.rgb.resize(stride * d.height);
  for (int y = 0; y < d.height; ++y) {
    int filter = raw[y * (stride + 1)];
    const uint8_t* in = &raw[y * (stride + 1) + 1];
    uint8_t* row = &d.rgb[y * stride];
    const uint8_t* up = y > 0 ? row - stride : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      int a = i >= 3 ? row[i - 3] : 0, b = up ? up[i] : 0, c = (up && i >= 3) ? up[i - 3] : 0;
      int pred = 0;
      switch (filter) {
        case 0: pred = 0; break;
        case 1: pred = a; break;
        case 2: pred = b; break;
        case 3: pred = (a + b) / 2; break;
        case 4: {
          int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b), pc = std::abs(p - c);
          pred = (pa <= pb && pa <= pc) ? a : (pb <= pc ? b : c);
          break;
        }
        default: throw std::runtime_error("bad filter type");
      }
      row[i] = static_cast<uint8_t>(in[i] + pred);
    }
  }
  return d;
}

std::vector<std::pair<int, int>> pixels_of(const Decoded& d, Rgb c) {
  std::vector<std::pair<int, int>> v;
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      if (d.at(x, y) == c) v.emplace_back(x, y);
    }
  }
  return v;
}

// ---- PNG encoder -------------------------------------------------------------------

TEST(Png, ChecksumsMatchKnownVectors) {
  const std::string s = "123456789";
  EXPECT_EQ(crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size()), 0xCBF43926u);
  const std::string w = "Wikipedia";
  EXPECT_EQ(adler32(reinterpret_cast<const uint8_t*>(w.data()), w.size()), 0x11E60398u);
}

TEST(Png, ZlibRoundTripsBothModes) {
  std::mt19937 rng(5);
  std::vector<std::vector<uint8_t>> inputs = {{}, {42}};
  std::vector<uint8_t> noise(70000), runs, text;
  for (auto& b : noise) b = static_cast<uint8_t>(rng());
  for (int i = 0; i < 100000; ++i) runs.push_back(static_cast<uint8_t>((i / 700) % 3 * 80));
  for (int i = 0; i < 3000; ++i) text.push_back(static_cast<uint8_t>("abcab"[rng() % 5]));
  inputs.push_back(noise);
  inputs.push_back(runs);
  inputs.push_back(text);
  for (const auto& in : inputs) {
    for (PngCompression mode : {PngCompression::kStored, PngCompression::kFixedHuffman}) {
      std::vector<uint8_t> z = zlib_compress(in.data(), in.size(), mode);
      EXPECT_EQ(zlib_inflate(z), in) << "size " << in.size() << " mode " << static_cast<int>(mode);
    }
  }
  EXPECT_LT(zlib_compress(runs.data(), runs.size(), PngCompression::kFixedHuffman).size(), runs.size() / 50);
}

TEST(Png, EncodedImageDecodesToSamePixels) {
  std::mt19937 rng(9);
  Image img(37, 23, {1, 2, 3});
  for (int y = 0; y < img.height(); ++y) {
    for (int x = 0; x < img.width(); ++x) {
      if (rng() % 3) img.set(x, y, {static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng()), static_cast<uint8_t>(rng())});
    }
  }
  for (PngCompression mode : {PngCompression::kStored, PngCompression::kFixedHuffman}) {
    Decoded d = decode_png(encode_png(img, mode));
    EXPECT_EQ(d.chunk_types, (std::vector<std::string>{"IHDR", "IDAT", "IEND"}));
    ASSERT_EQ(d.width, 37);
    ASSERT_EQ(d.height, 23);
    EXPECT_EQ(d.rgb, img.rgb());
  }
}

TEST(Png, WriteFailsLoudly) {
  Image img(4, 4);
  EXPECT_THROW(write_png(img, "/nonexistent-dir/x.png"), Error);
  EXPECT_THROW(Image(0, 10), Error);
}

// ---- plots ------------------------------------------------------------------------

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(Plot, TicksAndLabels) {
  using Labels = std::vector<std::string>;
  EXPECT_EQ(nice_ticks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(nice_ticks(-0.93, 0.41, 4), (std::vector<double>{-0.75, -0.5, -0.25, 0, 0.25}));
  EXPECT_EQ(format_ticks(nice_ticks(-0.93, 0.41, 4)), (Labels{"-0.75", "-0.50", "-0.25", "0", "0.25"}));
  EXPECT_TRUE(nice_ticks(1, 1, 5).empty());
  EXPECT_EQ(format_ticks(nice_ticks(0, 1.3e6, 4)), (Labels{"0", "0.5M", "1.0M"}));
  EXPECT_EQ(format_ticks(nice_ticks(0, 20000, 4)), (Labels{"0", "5k", "10k", "15k", "20k"}));
  EXPECT_EQ(format_ticks(nice_ticks(100, 200, 5)), (Labels{"100", "120", "140", "160", "180", "200"}));
  EXPECT_EQ(format_ticks({0.1, 0.2, 0.30000000000000004}), (Labels{"0.1", "0.2", "0.3"}));
  EXPECT_EQ(format_ticks({0, 1e-4, 2e-4, 3e-4}), (Labels{"0", "1e-4", "2e-4", "3e-4"}));
  EXPECT_EQ(format_ticks({5e-5, 1e-4, 1.5e-4}), (Labels{"0.5e-4", "1.0e-4", "1.5e-4"}));
  // Random ranges: ticks inside the range, evenly spaced, 3..12 of them, labels distinct.
  std::mt19937 rng(4);
  std::uniform_real_distribution<double> u(-3, 3);
  for (int i = 0; i < 200; ++i) {
    double a = u(rng) * std::pow(10, u(rng)), b = a + std::pow(10, u(rng));
    auto t = nice_ticks(a, b, 5);
    ASSERT_GE(t.size(), 3u) << a << " " << b;
    ASSERT_LE(t.size(), 12u) << a << " " << b;
    EXPECT_GE(t.front(), a - 1e-9 * (b - a));
    EXPECT_LE(t.back(), b + 1e-9 * (b - a));
    auto l = format_ticks(t);
    for (size_t k = 1; k < l.size(); ++k) EXPECT_NE(l[k], l[k - 1]) << a << " " << b;
  }
  EXPECT_EQ(text_width("ab", 2), 22);
}

TEST(Plot, SeriesPixelsLieOnTheLineInTheirColor) {
  // y = 3 - 2x on random x: every pixel drawn exactly in the series color lies on one line
  // in image space, sloping down from left to right... upward (image y grows downwards).
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> ux(0.0, 5.0);
  std::vector<double> xs(200), ys;
  for (double& x : xs) x = ux(rng);
  std::sort(xs.begin(), xs.end());
  for (double x : xs) ys.push_back(3 - 2 * x);
  const Rgb kColor{10, 200, 30};
  PlotPanel p{"fit", "x", {{"fit", xs, ys, kColor}}};
  std::string path = testing::TempDir() + "/plot_line." + std::to_string(::getpid()) + ".png";
  write_png_plots(path, {p}, 400, 300);
  Decoded d = decode_png(read_file(path));
  ASSERT_EQ(d.width, 400);
  ASSERT_EQ(d.height, 300);
  auto px = pixels_of(d, kColor);
  ASSERT_GT(px.size(), 200u);
  double n = static_cast<double>(px.size()), sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (auto [x, y] : px) {
    sx += x, sy += y, sxx += double(x) * x, sxy += double(x) * y, syy += double(y) * y;
  }
  double cov = sxy / n - sx / n * sy / n, vx = sxx / n - sx * sx / n / n, vy = syy / n - sy * sy / n / n;
  double r = cov / std::sqrt(vx * vy);
  EXPECT_GT(r, 0.999) << "pixels of the series are collinear and y grows down the image";
  int xmin = 1 << 30, xmax = 0;
  for (auto [x, y] : px) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
  EXPECT_GT(xmax - xmin, 250) << "the line spans most of the plot width";
  std::remove(path.c_str());
}

TEST(Plot, NonFiniteBreaksLineAndConstantAndEmptyAreHandled) {
  std::vector<double> xs, ys;
  for (int i = 0; i <= 100; ++i) {
    xs.push_back(i);
    ys.push_back(i >= 40 && i < 60 ? NAN : std::sin(i * 0.1));
  }
  xs[10] = INFINITY;
  const Rgb kWave{200, 20, 20}, kFlat{20, 20, 200};
  std::vector<PlotPanel> panels = {
      {"wave", "step", {{"wave", xs, ys, kWave}}},
      {"flat", "step", {{"flat", {1, 2, 3, 4}, {0.42, 0.42, 0.42, 0.42}, kFlat}}},
      {"empty", "step", {{"nothing", {}, {}, std::nullopt}, {"nan", {1, 2}, {NAN, NAN}, std::nullopt}}},
  };
  Image img = render_plots(panels, 900, 300);
  Decoded d = decode_png(encode_png(img));
  EXPECT_EQ(d.rgb, img.rgb());
  auto wave = pixels_of(d, kWave);
  ASSERT_FALSE(wave.empty());
  // Columns of the first panel holding the wave: there is a gap (the NaN run, 20% of x).
  std::vector<int> cols(300, 0);
  for (auto [x, y] : wave) {
    ASSERT_LT(x, 300) << "wave drawn only inside its panel";
    cols[x] = 1;
  }
  int first = std::find(cols.begin(), cols.end(), 1) - cols.begin();
  int last = 299 - static_cast<int>(std::find(cols.rbegin(), cols.rend(), 1) - cols.rbegin());
  int longest_gap = 0, gap = 0;
  for (int x = first; x <= last; ++x) {
    gap = cols[x] ? 0 : gap + 1;
    longest_gap = std::max(longest_gap, gap);
  }
  EXPECT_GT(longest_gap, (last - first) / 6) << "NaN points leave a gap";
  // Constant series: a horizontal line (full-coverage rows) in the second panel.
  auto flat = pixels_of(d, kFlat);
  ASSERT_FALSE(flat.empty());
  int ymin = 1 << 30, ymax = 0;
  for (auto [x, y] : flat) {
    EXPECT_GE(x, 300);
    EXPECT_LT(x, 600);
    ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  }
  EXPECT_LE(ymax - ymin, 6) << "constant series is flat (markers add a few rows)";
  // Empty panel: none of its series are drawn; the legend swatches are palette colors.
  for (auto [x, y] : pixels_of(d, palette_color(0))) EXPECT_GE(x, 600);
}

TEST(Plot, DenseSeriesKeepsSinglePointSpikes) {
  // 200k points, many per pixel column: one-sample spikes up and down must still be drawn.
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> small(-0.01, 0.01);
  std::vector<double> xs(200000), ys(200000);
  for (size_t i = 0; i < xs.size(); ++i) {
    xs[i] = static_cast<double>(i);
    ys[i] = small(rng);
  }
  ys[123457] = 1.0;
  ys[54321] = -1.0;
  const Rgb kColor{5, 90, 5};
  Decoded d = decode_png(encode_png(render_plots({{"dense", "i", {{"dense", xs, ys, kColor}}}}, 400, 300)));
  auto px = pixels_of(d, kColor);
  ASSERT_FALSE(px.empty());
  int ymin = 1 << 30, ymax = 0;
  for (auto [x, y] : px) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  EXPECT_GT(ymax - ymin, 180) << "both spikes reach the edges of a ~230 px tall plot";
}

TEST(Plot, LegendShowsEachNamedSeries) {
  std::vector<double> xs = {0, 1, 2, 3}, a = {0, 1, 0, 1}, b = {1, 0, 1, 0};
  const Rgb kA{250, 0, 250}, kB{0, 250, 250};
  PlotPanel p{"two", "step", {{"alpha", xs, a, kA}, {"beta", xs, b, kB}}};
  Decoded d = decode_png(encode_png(render_plots({p}, 500, 300)));
  for (Rgb c : {kA, kB}) {
    // The swatch is a solid horizontal run of the color at least 16 px long.
    int best = 0;
    for (int y = 0; y < d.height; ++y) {
      int run = 0;
      for (int x = 0; x < d.width; ++x) {
        run = d.at(x, y) == c ? run + 1 : 0;
        best = std::max(best, run);
      }
    }
    EXPECT_GE(best, 16);
  }
}

TEST(Plot, BadInputThrows) {
  EXPECT_THROW(render_plots({}, 400, 300), Error);
  PlotPanel mismatched{"t", "x", {{"s", {1, 2}, {1}, std::nullopt}}};
  EXPECT_THROW(render_plots({mismatched}, 400, 300), Error);
  PlotPanel ok{"t", "x", {{"s", {1, 2}, {1, 2}, std::nullopt}}};
  EXPECT_THROW(render_plots({ok}, 50, 300), Error);
}

}  // namespace
}  // namespace moerl
