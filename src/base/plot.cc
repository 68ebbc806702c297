// Line-chart rendering: grid layout, per-panel axes/ticks/grid, anti-aliased series drawn
// through a coverage buffer (so joints do not darken), legend placed in the emptiest corner.
#include "base/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/error.h"
#include "base/font.h"

namespace moerl {
namespace {

constexpr Rgb kBackground{255, 255, 255};
constexpr Rgb kTitleInk{30, 30, 30};
constexpr Rgb kTextInk{80, 80, 80};
constexpr Rgb kFrame{150, 150, 150};
constexpr Rgb kGrid{234, 234, 234};
constexpr Rgb kLegendBorder{205, 205, 205};

struct Rect {
  int x0, y0, x1, y1;  // [x0, x1) x [y0, y1)
  int w() const { return x1 - x0; }
  int h() const { return y1 - y0; }
};

struct Range {
  double lo, hi;
};

// Per-pixel coverage in [0, 1] over a rectangle; a series is rasterized into one buffer
// (max over its segments) and blended once.
class Coverage {
 public:
  explicit Coverage(Rect r) : r_(r), a_(static_cast<size_t>(r.w()) * r.h(), 0.0f) {}
  void segment(double ax, double ay, double bx, double by, double half) {
    int x0 = static_cast<int>(std::floor(std::min(ax, bx) - half - 1));
    int x1 = static_cast<int>(std::ceil(std::max(ax, bx) + half + 1));
    int y0 = static_cast<int>(std::floor(std::min(ay, by) - half - 1));
    int y1 = static_cast<int>(std::ceil(std::max(ay, by) + half + 1));
    double dx = bx - ax, dy = by - ay, len2 = dx * dx + dy * dy;
    for (int y = std::max(y0, r_.y0); y < std::min(y1, r_.y1); ++y) {
      for (int x = std::max(x0, r_.x0); x < std::min(x1, r_.x1); ++x) {
        double px = x + 0.5 - ax, py = y + 0.5 - ay;
        double t = len2 > 0 ? std::clamp((px * dx + py * dy) / len2, 0.0, 1.0) : 0.0;
        double d = std::hypot(px - t * dx, py - t * dy);
        put(x, y, half + 0.5 - d);
      }
    }
  }
  void disc(double cx, double cy, double radius) { segment(cx, cy, cx, cy, radius); }
  void blend_into(Image& img, Rgb color) const {
    for (int y = r_.y0; y < r_.y1; ++y) {
      for (int x = r_.x0; x < r_.x1; ++x) img.blend(x, y, color, at(x, y));
    }
  }
  float at(int x, int y) const { return a_[static_cast<size_t>(y - r_.y0) * r_.w() + (x - r_.x0)]; }
  void max_with(const Coverage& o) {
    for (size_t i = 0; i < a_.size(); ++i) a_[i] = std::max(a_[i], o.a_[i]);
  }
  double sum_in(Rect q) const {
    double s = 0;
    for (int y = std::max(q.y0, r_.y0); y < std::min(q.y1, r_.y1); ++y) {
      for (int x = std::max(q.x0, r_.x0); x < std::min(q.x1, r_.x1); ++x) s += at(x, y);
    }
    return s;
  }

 private:
  void put(int x, int y, double c) {
    if (c <= 0) return;
    float& v = a_[static_cast<size_t>(y - r_.y0) * r_.w() + (x - r_.x0)];
    v = std::max(v, static_cast<float>(std::min(c, 1.0)));
  }
  Rect r_;
  std::vector<float> a_;
};

struct Point {
  double x, y;  // pixel coordinates
};

// Keeps, for each run of consecutive points in one pixel column, the first, lowest, highest
// and last point in their original order: the drawn polyline looks the same while
// millions of points cost no more than a few per column.
std::vector<Point> decimate_by_column(const std::vector<Point>& pts) {
  std::vector<Point> out;
  size_t i = 0;
  while (i < pts.size()) {
    size_t j = i;
    const double col = std::floor(pts[i].x);
    size_t lo = i, hi = i;
    while (j < pts.size() && std::floor(pts[j].x) == col) {
      if (pts[j].y < pts[lo].y) lo = j;
      if (pts[j].y > pts[hi].y) hi = j;
      ++j;
    }
    size_t keep[4] = {i, std::min(lo, hi), std::max(lo, hi), j - 1};
    for (int k = 0; k < 4; ++k) {
      if (k == 0 || keep[k] != keep[k - 1]) out.push_back(pts[keep[k]]);
    }
    i = j;
  }
  return out;
}

bool finite_point(const PlotSeries& s, size_t i) {
  return std::isfinite(s.xs[i]) && std::isfinite(s.ys[i]);
}

// Range with a margin; a degenerate (constant) range widens around its value.
Range widen(double lo, double hi, double margin_frac) {
  if (!(lo <= hi)) return {0, 1};
  if (hi - lo <= 1e-12 * std::max(1.0, std::fabs(lo))) {
    double d = lo != 0 ? std::fabs(lo) * 0.1 : 1.0;
    return {lo - d, hi + d};
  }
  double m = (hi - lo) * margin_frac;
  return {lo - m, hi + m};
}

std::string fit_text(const std::string& text, int max_px, int scale) {
  if (text_width(text, scale) <= max_px) return text;
  std::string t = text;
  while (!t.empty() && text_width(t + "...", scale) > max_px) t.pop_back();
  return t.empty() ? "" : t + "...";
}

void validate(const std::vector<PlotPanel>& panels, int width, int height) {
  if (panels.empty()) {
    throw Error("plot: no panels to draw", "pass at least one PlotPanel (one per chart)");
  }
  for (const auto& p : panels) {
    for (const auto& s : p.series) {
      if (s.xs.size() != s.ys.size()) {
        throw Error("plot panel '" + p.title + "', series '" + s.name + "': " +
                        std::to_string(s.xs.size()) + " x values but " +
                        std::to_string(s.ys.size()) + " y values",
                    "give xs and ys of the same length");
      }
    }
  }
  if (width < 160 || height < 120 || width > 16384 || height > 16384) {
    throw Error("plot size " + std::to_string(width) + "x" + std::to_string(height) +
                    " is out of range",
                "use at least 160x120 pixels (e.g. 1200x480) and at most 16384 per side");
  }
}

void draw_panel(Image& img, const PlotPanel& panel, Rect box, int s, double line_width) {
  const int ts = s + 1;  // title scale
  const int pad = 6 + 4 * s;
  const int th = text_height(s);

  // Data extent over finite points.
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  size_t num_finite = 0;
  for (const auto& sr : panel.series) {
    for (size_t i = 0; i < sr.xs.size(); ++i) {
      if (!finite_point(sr, i)) continue;
      ++num_finite;
      xlo = std::min(xlo, sr.xs[i]);
      xhi = std::max(xhi, sr.xs[i]);
      ylo = std::min(ylo, sr.ys[i]);
      yhi = std::max(yhi, sr.ys[i]);
    }
  }
  Range xr = num_finite ? widen(xlo, xhi, 0.02) : Range{0, 1};
  Range yr = num_finite ? widen(ylo, yhi, 0.06) : Range{0, 1};

  // Title.
  int top = box.y0 + pad;
  if (!panel.title.empty()) {
    std::string t = fit_text(panel.title, box.w() - 2 * pad, ts);
    draw_text(img, box.x0 + (box.w() - text_width(t, ts)) / 2, top, t, kTitleInk, ts);
    top += text_height(ts) + pad;
  }

  // Y ticks first: their label width sets the left margin.
  int bottom_margin = 4 * s + 3 * s + th + pad + (panel.x_label.empty() ? 0 : th + pad);
  int plot_h_guess = std::max(20, box.y1 - bottom_margin - top);
  std::vector<double> yt = nice_ticks(yr.lo, yr.hi, std::max(2, plot_h_guess / (45 * s)));
  std::vector<std::string> ylabels = format_ticks(yt);
  int ylab_w = 0;
  for (const auto& l : ylabels) ylab_w = std::max(ylab_w, text_width(l, s));
  int left = pad + (panel.y_label.empty() ? 0 : th + pad) + ylab_w + 4 * s + 3 * s;
  Rect plot{box.x0 + left, top, box.x1 - pad - 16 * s, box.y1 - bottom_margin};
  if (plot.w() < 20 || plot.h() < 20) return;  // too small to draw anything useful

  auto px_of = [&](double x) { return plot.x0 + 0.5 + (x - xr.lo) / (xr.hi - xr.lo) * (plot.w() - 1); };
  auto py_of = [&](double y) { return plot.y1 - 0.5 - (y - yr.lo) / (yr.hi - yr.lo) * (plot.h() - 1); };

  // X ticks: as many as fit without labels touching.
  std::vector<double> xt;
  std::vector<std::string> xlabels;
  for (int target = std::max(2, plot.w() / (70 * s)); target >= 2; --target) {
    xt = nice_ticks(xr.lo, xr.hi, target);
    xlabels = format_ticks(xt);
    int widest = 0;
    for (const auto& l : xlabels) widest = std::max(widest, text_width(l, s));
    double spacing = xt.size() > 1 ? (px_of(xt[1]) - px_of(xt[0])) : 1e9;
    if (widest + 12 * s < spacing) break;
  }

  // Grid, frame, ticks and tick labels.
  for (double v : yt) {
    int y = static_cast<int>(std::floor(py_of(v)));
    img.fill_rect(plot.x0, y, plot.x1, y + 1, kGrid);
  }
  for (double v : xt) {
    int x = static_cast<int>(std::floor(px_of(v)));
    img.fill_rect(x, plot.y0, x + 1, plot.y1, kGrid);
  }
  img.fill_rect(plot.x0 - 1, plot.y0 - 1, plot.x1 + 1, plot.y0, kFrame);
  img.fill_rect(plot.x0 - 1, plot.y1, plot.x1 + 1, plot.y1 + 1, kFrame);
  img.fill_rect(plot.x0 - 1, plot.y0 - 1, plot.x0, plot.y1 + 1, kFrame);
  img.fill_rect(plot.x1, plot.y0 - 1, plot.x1 + 1, plot.y1 + 1, kFrame);
  const int tick_len = 4 * s;
  for (size_t i = 0; i < yt.size(); ++i) {
    int y = static_cast<int>(std::floor(py_of(yt[i])));
    img.fill_rect(plot.x0 - 1 - tick_len, y, plot.x0 - 1, y + 1, kFrame);
    int w = text_width(ylabels[i], s);
    draw_text(img, plot.x0 - 1 - tick_len - 3 * s - w, y - (7 * s) / 2, ylabels[i], kTextInk, s);
  }
  for (size_t i = 0; i < xt.size(); ++i) {
    int x = static_cast<int>(std::floor(px_of(xt[i])));
    img.fill_rect(x, plot.y1 + 1, x + 1, plot.y1 + 1 + tick_len, kFrame);
    const std::string& l = xlabels[i];
    draw_text(img, x - text_width(l, s) / 2, plot.y1 + 1 + tick_len + 3 * s, l, kTextInk, s);
  }
  if (!panel.x_label.empty()) {
    std::string l = fit_text(panel.x_label, plot.w(), s);
    draw_text(img, plot.x0 + (plot.w() - text_width(l, s)) / 2,
              plot.y1 + 1 + tick_len + 3 * s + th + pad / 2 + 2, l, kTitleInk, s);
  }
  if (!panel.y_label.empty()) {
    std::string l = fit_text(panel.y_label, plot.h(), s);
    draw_text_vertical(img, box.x0 + pad, plot.y0 + (plot.h() - text_width(l, s)) / 2, l,
                       kTitleInk, s);
  }
  if (num_finite == 0) {
    const std::string msg = "no data";
    draw_text(img, plot.x0 + (plot.w() - text_width(msg, ts)) / 2,
              plot.y0 + (plot.h() - text_height(ts)) / 2, msg, kFrame, ts);
  }

  // Series: lines between consecutive finite points; markers where points are few or isolated.
  const double half = std::max(0.5, line_width / 2);
  Coverage all(plot);
  for (size_t k = 0; k < panel.series.size(); ++k) {
    const PlotSeries& sr = panel.series[k];
    Coverage cov(plot);
    std::vector<std::vector<Point>> pieces(1);  // NaN/Inf points split the polyline
    size_t n_finite = 0;
    for (size_t i = 0; i < sr.xs.size(); ++i) {
      if (!finite_point(sr, i)) {
        if (!pieces.back().empty()) pieces.emplace_back();
        continue;
      }
      ++n_finite;
      pieces.back().push_back({px_of(sr.xs[i]), py_of(sr.ys[i])});
    }
    const bool markers = n_finite <= 40;
    for (auto& piece : pieces) {
      if (piece.size() > 4 * static_cast<size_t>(plot.w())) piece = decimate_by_column(piece);
      for (size_t i = 0; i < piece.size(); ++i) {
        if (i > 0) cov.segment(piece[i - 1].x, piece[i - 1].y, piece[i].x, piece[i].y, half);
        if (markers || piece.size() == 1) cov.disc(piece[i].x, piece[i].y, half + 1.5);
      }
    }
    cov.blend_into(img, sr.color.value_or(palette_color(k)));
    all.max_with(cov);
  }

  // Legend: skipped when the only series is named like the panel.
  std::vector<size_t> entries;
  for (size_t k = 0; k < panel.series.size(); ++k) {
    if (!panel.series[k].name.empty()) entries.push_back(k);
  }
  if (entries.empty() || (entries.size() == 1 && panel.series[entries[0]].name == panel.title)) return;
  const int row_h = th + 4 * s, swatch = 16 * s, inner = 5 * s;
  int name_w = 0;
  for (size_t k : entries) name_w = std::max(name_w, text_width(panel.series[k].name, s));
  name_w = std::min(name_w, plot.w() / 2);
  int lw = inner + swatch + 4 * s + name_w + inner;
  int lh = inner + static_cast<int>(entries.size()) * row_h - 4 * s + inner;
  const int m = 6 * s;
  const Rect corners[4] = {{plot.x1 - m - lw, plot.y0 + m, plot.x1 - m, plot.y0 + m + lh},
                           {plot.x0 + m, plot.y0 + m, plot.x0 + m + lw, plot.y0 + m + lh},
                           {plot.x1 - m - lw, plot.y1 - m - lh, plot.x1 - m, plot.y1 - m},
                           {plot.x0 + m, plot.y1 - m - lh, plot.x0 + m + lw, plot.y1 - m}};
  Rect lb = corners[0];
  double best = INFINITY;
  for (const Rect& c : corners) {
    double covered = all.sum_in(c);
    if (covered < best - 0.5) {  // ties keep the earlier (preferred) corner
      best = covered;
      lb = c;
    }
  }
  for (int y = lb.y0; y < lb.y1; ++y) {
    for (int x = lb.x0; x < lb.x1; ++x) img.blend(x, y, kBackground, 0.88);
  }
  img.fill_rect(lb.x0, lb.y0, lb.x1, lb.y0 + 1, kLegendBorder);
  img.fill_rect(lb.x0, lb.y1 - 1, lb.x1, lb.y1, kLegendBorder);
  img.fill_rect(lb.x0, lb.y0, lb.x0 + 1, lb.y1, kLegendBorder);
  img.fill_rect(lb.x1 - 1, lb.y0, lb.x1, lb.y1, kLegendBorder);
  for (size_t e = 0; e < entries.size(); ++e) {
    const PlotSeries& sr = panel.series[entries[e]];
    int y = lb.y0 + inner + static_cast<int>(e) * row_h;
    int mid = y + (7 * s) / 2;
    int thick = std::max(2, static_cast<int>(std::lround(line_width)));
    img.fill_rect(lb.x0 + inner, mid - thick / 2, lb.x0 + inner + swatch, mid - thick / 2 + thick,
                  sr.color.value_or(palette_color(entries[e])));
    draw_text(img, lb.x0 + inner + swatch + 4 * s, y, fit_text(sr.name, name_w, s), kTitleInk, s);
  }
}

}  // namespace

Rgb palette_color(size_t i) {
  // Ten distinguishable hues that read well on white (in the spirit of common plot palettes).
  static const Rgb kPalette[10] = {{31, 119, 180}, {230, 110, 20},  {44, 160, 44},  {214, 39, 40},
                                   {148, 103, 189}, {140, 86, 75},  {220, 100, 180}, {110, 110, 110},
                                   {170, 170, 30},  {23, 170, 190}};
  return kPalette[i % 10];
}

std::pair<int, int> plot_grid(int num_panels, int columns) {
  int n = std::max(1, num_panels);
  int cols = columns > 0 ? std::min(columns, n) : (n <= 3 ? n : static_cast<int>(std::ceil(std::sqrt(n))));
  return {cols, (n + cols - 1) / cols};
}

Image render_plots(const std::vector<PlotPanel>& panels, int width, int height,
                   const PlotOptions& options) {
  validate(panels, width, height);
  const int n = static_cast<int>(panels.size());
  auto [cols, rows] = plot_grid(n, options.columns);
  Image img(width, height, kBackground);

  int top = 0;
  int cell_w = width / cols, cell_h0 = height / rows;
  int s = options.font_scale > 0 ? options.font_scale
                                 : std::clamp(std::min(cell_w / 420, cell_h0 / 300), 1, 4);
  if (!options.title.empty()) {
    int ts = s + 1;
    std::string t = fit_text(options.title, width - 16, ts);
    draw_text(img, (width - text_width(t, ts)) / 2, 8 + 2 * s, t, kTitleInk, ts);
    top = 8 + 2 * s + text_height(ts) + 8 * s;
  }
  int cell_h = (height - top) / rows;
  for (int i = 0; i < n; ++i) {
    int r = i / cols, c = i % cols;
    Rect box{c * cell_w, top + r * cell_h, (c + 1) * cell_w, top + (r + 1) * cell_h};
    draw_panel(img, panels[static_cast<size_t>(i)], box, s, options.line_width);
  }
  return img;
}

void write_png_plots(const std::string& path, const std::vector<PlotPanel>& panels, int width,
                     int height, const PlotOptions& options) {
  write_png(render_plots(panels, width, height, options), path);
}

}  // namespace moerl
