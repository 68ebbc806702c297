// Tests for the cairo line charts: tick choice, what the PNG shows (decoded back through
// cairo's PNG reader: size, series pixels where the data puts them, gaps, spikes, legend),
// and the SVG (parsed by Python's XML parser: well-formed, sized, one stroke per series color).
#include <cairo.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <set>

#include "base/error.h"
#include "base/plot.h"
#include "base/subprocess.h"

namespace moerl {
namespace {

struct Decoded {
  int width = 0, height = 0;
  std::vector<Rgb> px;
  Rgb at(int x, int y) const { return px[static_cast<size_t>(y) * width + x]; }
};

Decoded decode_png(const std::string& bytes) {
  struct Reader {
    const std::string* s;
    size_t off = 0;
  } r{&bytes};
  cairo_surface_t* s = cairo_image_surface_create_from_png_stream(
      [](void* c, unsigned char* data, unsigned int n) {
        auto* rd = static_cast<Reader*>(c);
        if (rd->off + n > rd->s->size()) return CAIRO_STATUS_READ_ERROR;
        std::copy_n(rd->s->data() + rd->off, n, data);
        rd->off += n;
        return CAIRO_STATUS_SUCCESS;
      },
      &r);
  EXPECT_EQ(cairo_surface_status(s), CAIRO_STATUS_SUCCESS) << "the PNG does not decode";
  Decoded d;
  d.width = cairo_image_surface_get_width(s);
  d.height = cairo_image_surface_get_height(s);
  const int stride = cairo_image_surface_get_stride(s);
  const unsigned char* data = cairo_image_surface_get_data(s);
  for (int y = 0; y < d.height && data; ++y) {
    for (int x = 0; x < d.width; ++x) {
      uint32_t v;
      std::memcpy(&v, data + static_cast<size_t>(y) * stride + 4 * x, 4);  // native-endian xRGB
      d.px.push_back(Rgb{static_cast<uint8_t>(v >> 16), static_cast<uint8_t>(v >> 8), static_cast<uint8_t>(v)});
    }
  }
  cairo_surface_destroy(s);
  return d;
}

// Pixels drawn in (nearly) the color: the line's core, where anti-aliasing left it opaque.
std::vector<std::pair<int, int>> pixels_of(const Decoded& d, Rgb c, int tol = 24) {
  std::vector<std::pair<int, int>> out;
  for (int y = 0; y < d.height; ++y) {
    for (int x = 0; x < d.width; ++x) {
      Rgb p = d.at(x, y);
      if (std::abs(p.r - c.r) <= tol && std::abs(p.g - c.g) <= tol && std::abs(p.b - c.b) <= tol) out.emplace_back(x, y);
    }
  }
  return out;
}

Decoded render_png(const std::vector<PlotPanel>& panels, int w, int h) {
  return decode_png(render_plots(panels, w, h, PlotFormat::kPng));
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
  EXPECT_EQ(plot_grid(4), (std::pair<int, int>{2, 2}));
  EXPECT_EQ(plot_grid(3), (std::pair<int, int>{3, 1}));
  EXPECT_EQ(plot_grid(5, 2), (std::pair<int, int>{2, 3}));
}

TEST(Plot, PngHasTheSizeAndSeriesPixelsLieOnTheLine) {
  // y = 3 - 2x on random x: the pixels drawn in the series color lie on one line in image
  // space, rising from left to right in y pixels (image y grows downwards).
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> ux(0.0, 5.0);
  std::vector<double> xs(200), ys;
  for (double& x : xs) x = ux(rng);
  std::sort(xs.begin(), xs.end());
  for (double x : xs) ys.push_back(3 - 2 * x);
  const Rgb kColor{10, 200, 30};
  Decoded d = render_png({PlotPanel{"fit", "x", {{"fit", xs, ys, kColor}}}}, 400, 300);
  ASSERT_EQ(d.width, 400);
  ASSERT_EQ(d.height, 300);
  auto px = pixels_of(d, kColor);
  ASSERT_GT(px.size(), 200u);
  double n = static_cast<double>(px.size()), sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
  for (auto [x, y] : px) sx += x, sy += y, sxx += double(x) * x, sxy += double(x) * y, syy += double(y) * y;
  double cov = sxy / n - sx / n * sy / n, vx = sxx / n - sx * sx / n / n, vy = syy / n - sy * sy / n / n;
  EXPECT_GT(cov / std::sqrt(vx * vy), 0.999) << "pixels of the series are collinear and y grows down the image";
  int xmin = 1 << 30, xmax = 0;
  for (auto [x, y] : px) xmin = std::min(xmin, x), xmax = std::max(xmax, x);
  EXPECT_GT(xmax - xmin, 250) << "the line spans most of the plot width";
  // Not blank: axes, labels and the title put dark ink on the white page.
  size_t dark = 0;
  for (const Rgb& p : d.px) dark += p.r < 128 && p.g < 128 && p.b < 128;
  EXPECT_GT(dark, 200u) << "text and frame are drawn";
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
  Decoded d = render_png(panels, 900, 300);
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
  // Constant series: a horizontal line in the second panel.
  auto flat = pixels_of(d, kFlat);
  ASSERT_FALSE(flat.empty());
  int ymin = 1 << 30, ymax = 0;
  for (auto [x, y] : flat) {
    EXPECT_GE(x, 300);
    EXPECT_LT(x, 600);
    ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  }
  EXPECT_LE(ymax - ymin, 7) << "constant series is flat (markers add a few rows)";
  // Empty panel: none of its series are drawn; only its legend swatches carry palette colors.
  for (auto [x, y] : pixels_of(d, palette_color(0), 4)) EXPECT_GE(x, 600);
}

TEST(Plot, DenseSeriesKeepsSinglePointSpikes) {
  // 200k points, many per pixel column: one-sample spikes up and down must still be drawn.
  std::mt19937 rng(8);
  std::uniform_real_distribution<double> small(-0.01, 0.01);
  std::vector<double> xs(200000), ys(200000);
  for (size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<double>(i), ys[i] = small(rng);
  ys[123457] = 1.0;
  ys[54321] = -1.0;
  const Rgb kColor{5, 90, 5};
  Decoded d = render_png({PlotPanel{"dense", "i", {{"dense", xs, ys, kColor}}}}, 400, 300);
  auto px = pixels_of(d, kColor);
  ASSERT_FALSE(px.empty());
  int ymin = 1 << 30, ymax = 0;
  for (auto [x, y] : px) ymin = std::min(ymin, y), ymax = std::max(ymax, y);
  EXPECT_GT(ymax - ymin, 180) << "both spikes reach the edges of a ~220 px tall plot";
}

TEST(Plot, LegendShowsEachNamedSeries) {
  std::vector<double> xs = {0, 1, 2, 3}, a = {0, 1, 0, 1}, b = {1, 0, 1, 0};
  const Rgb kA{250, 0, 250}, kB{0, 250, 250};
  Decoded d = render_png({PlotPanel{"two", "step", {{"alpha", xs, a, kA}, {"beta", xs, b, kB}}}}, 500, 300);
  for (Rgb c : {kA, kB}) {
    // The swatch is a solid horizontal run of exactly the color, at least 16 px long.
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

// Python's XML parser on the SVG: prints the root tag, its width and height, and every
// stroke color as r,g,b in 0..255.
constexpr const char* kSvgProbe = R"(
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
print(root.tag, root.get('width'), root.get('height'))
for el in root.iter():
    m = re.search(r'stroke:rgb\(([\d.]+)%,([\d.]+)%,([\d.]+)%\)', el.get('style', ''))
    if m: print('stroke', ','.join(str(round(float(v) * 2.55)) for v in m.groups()))
)";

TEST(Plot, SvgIsWellFormedAndHoldsEverySeries) {
  std::vector<double> xs = {0, 1, 2, 3, 4};
  PlotPanel reward{"reward", "step", {{"train", xs, {0.1, 0.3, 0.2, 0.6, 0.7}}, {"eval", {0, 2, 4}, {0.2, 0.4, 0.5}}}};
  PlotPanel loss{"loss", "step", {{"loss", xs, {2, 1.5, 1.2, 1.1, 1.0}, Rgb{1, 2, 3}}}};
  const std::string path = testing::TempDir() + "/plot." + std::to_string(::getpid()) + ".svg";
  write_plots(path, {reward, loss}, 900, 400, {.title = "run <a> & \"b\""});
  CapturedRun r = run_captured({"python3", "-c", kSvgProbe, path}, Deadline::after_seconds(60));
  ASSERT_EQ(r.status, 0) << "the SVG is not well-formed XML:\n" << r.output;
  EXPECT_EQ(r.output.substr(0, r.output.find('\n')), "{http://www.w3.org/2000/svg}svg 900px 400px") << r.output;
  for (Rgb c : {palette_color(0), palette_color(1), Rgb{1, 2, 3}}) {
    std::string want = "stroke " + std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + "\n";
    EXPECT_NE(r.output.find(want), std::string::npos) << "no stroke in " << want << r.output;
  }
  std::remove(path.c_str());
}

TEST(Plot, FormatFollowsTheExtension) {
  EXPECT_EQ(plot_format_of("a/plot.png"), PlotFormat::kPng);
  EXPECT_EQ(plot_format_of("PLOT.SVG"), PlotFormat::kSvg);
  EXPECT_THROW(plot_format_of("plot.jpg"), Error);
  EXPECT_THROW(plot_format_of("svg"), Error);
  PlotPanel p{"t", "x", {{"s", {1, 2}, {1, 2}, std::nullopt}}};
  const std::string base = testing::TempDir() + "/fmt." + std::to_string(::getpid());
  write_plots(base + ".png", {p}, 300, 200);
  std::ifstream in(base + ".png", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  EXPECT_EQ(decode_png(bytes).width, 300);
  std::remove((base + ".png").c_str());
  try {
    write_plots("/nonexistent-dir/plot.png", {p}, 300, 200);
    ADD_FAILURE() << "an unwritable path must throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
  }
}

TEST(Plot, BadInputThrows) {
  EXPECT_THROW(render_plots({}, 400, 300, PlotFormat::kPng), Error);
  PlotPanel mismatched{"t", "x", {{"s", {1, 2}, {1}, std::nullopt}}};
  EXPECT_THROW(render_plots({mismatched}, 400, 300, PlotFormat::kSvg), Error);
  PlotPanel ok{"t", "x", {{"s", {1, 2}, {1, 2}, std::nullopt}}};
  EXPECT_THROW(render_plots({ok}, 50, 300, PlotFormat::kPng), Error);
  // Text that is not UTF-8 is drawn with '?' instead of failing the plot.
  EXPECT_EQ(render_png({PlotPanel{"bad \xff\xfe", "x\x80", ok.series}}, 300, 200).width, 300);
}

}  // namespace
}  // namespace moerl
