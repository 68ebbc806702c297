// Line-chart rendering on cairo: grid layout, per-panel axes/ticks/grid, series polylines
// (decimated per pixel column when dense), and a legend placed in the emptiest corner. The
// same drawing goes to an image surface (PNG) or an SVG surface.
#include "base/plot.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <memory>

#include "base/error.h"
#include "base/files.h"
#include "base/plot_draw.h"

namespace moerl {
namespace {

using plot_draw::hline;
using plot_draw::Pen;
using plot_draw::set_color;
using plot_draw::vline;

constexpr Rgb kBackground{255, 255, 255};
constexpr Rgb kTitleInk{30, 30, 30};
constexpr Rgb kTextInk{80, 80, 80};
constexpr Rgb kFrame{150, 150, 150};
constexpr Rgb kGrid{234, 234, 234};
constexpr Rgb kLegendBorder{205, 205, 205};

struct Box {
  double x0, y0, x1, y1;
  double w() const { return x1 - x0; }
  double h() const { return y1 - y0; }
  bool contains(double x, double y) const { return x >= x0 && x < x1 && y >= y0 && y < y1; }
};

struct Range {
  double lo, hi;
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

bool finite_point(const PlotSeries& s, size_t i) { return std::isfinite(s.xs[i]) && std::isfinite(s.ys[i]); }

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

void validate(const std::vector<PlotPanel>& panels, int width, int height) {
  if (panels.empty()) throw Error("plot: no panels to draw", "pass at least one PlotPanel (one per chart)");
  for (const auto& p : panels) {
    for (const auto& s : p.series) {
      if (s.xs.size() != s.ys.size()) {
        throw Error("plot panel '" + p.title + "', series '" + s.name + "': " + std::to_string(s.xs.size()) +
                        " x values but " + std::to_string(s.ys.size()) + " y values",
                    "give xs and ys of the same length");
      }
    }
  }
  if (width < 160 || height < 120 || width > 16384 || height > 16384) {
    throw Error("plot size " + std::to_string(width) + "x" + std::to_string(height) + " is out of range",
                "use at least 160x120 pixels (e.g. 1200x480) and at most 16384 per side");
  }
}

void draw_legend(cairo_t* cr, const PlotPanel& panel, Box plot, const Pen& pen, double line_width,
                 const std::vector<Point>& drawn) {
  std::vector<size_t> entries;
  for (size_t k = 0; k < panel.series.size(); ++k) {
    if (!panel.series[k].name.empty()) entries.push_back(k);
  }
  // Skipped when the only series is named like the panel.
  if (entries.empty() || (entries.size() == 1 && panel.series[entries[0]].name == panel.title)) return;
  const double s = pen.px(), row_h = std::ceil(pen.height() + 0.3 * s), swatch = std::ceil(1.6 * s);
  const double inner = std::ceil(0.5 * s), m = std::ceil(0.6 * s);
  double name_w = 0;
  for (size_t k : entries) name_w = std::max(name_w, pen.width(panel.series[k].name));
  name_w = std::ceil(std::min(name_w, plot.w() / 2));
  const double lw = inner + swatch + 0.4 * s + name_w + inner, lh = inner + entries.size() * row_h + inner;
  const Box corners[4] = {{plot.x1 - m - lw, plot.y0 + m, plot.x1 - m, plot.y0 + m + lh},
                          {plot.x0 + m, plot.y0 + m, plot.x0 + m + lw, plot.y0 + m + lh},
                          {plot.x1 - m - lw, plot.y1 - m - lh, plot.x1 - m, plot.y1 - m},
                          {plot.x0 + m, plot.y1 - m - lh, plot.x0 + m + lw, plot.y1 - m}};
  Box lb = corners[0];
  size_t best = SIZE_MAX;
  for (const Box& c : corners) {  // ties keep the earlier (preferred) corner
    size_t covered = std::count_if(drawn.begin(), drawn.end(), [&](const Point& p) { return c.contains(p.x, p.y); });
    if (covered < best) best = covered, lb = c;
  }
  lb = {std::floor(lb.x0), std::floor(lb.y0), std::floor(lb.x1), std::floor(lb.y1)};
  set_color(cr, kBackground, 0.88);
  cairo_rectangle(cr, lb.x0, lb.y0, lb.w(), lb.h());
  cairo_fill(cr);
  set_color(cr, kLegendBorder);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, lb.x0 + 0.5, lb.y0 + 0.5, lb.w() - 1, lb.h() - 1);
  cairo_stroke(cr);
  const double thick = std::max(2.0, std::round(line_width));
  for (size_t e = 0; e < entries.size(); ++e) {
    const PlotSeries& sr = panel.series[entries[e]];
    const double y = lb.y0 + inner + e * row_h;
    const double mid = std::floor(y + pen.height() / 2);
    // Integer-aligned, so the swatch is exactly the series color in a PNG.
    set_color(cr, sr.color.value_or(palette_color(entries[e])));
    cairo_rectangle(cr, lb.x0 + inner, mid - std::floor(thick / 2), swatch, thick);
    cairo_fill(cr);
    pen.draw(lb.x0 + inner + swatch + 0.4 * s, y, pen.fit(sr.name, name_w), kTitleInk);
  }
}

void draw_panel(cairo_t* cr, const PlotPanel& panel, Box box, double s, double line_width) {
  const Pen text(cr, s, false), title(cr, 1.25 * s, true), label(cr, s, true);
  const double pad = std::ceil(0.6 * s), th = text.height(), tick_len = std::ceil(0.4 * s);

  // Data extent over finite points.
  double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
  size_t num_finite = 0;
  for (const auto& sr : panel.series) {
    for (size_t i = 0; i < sr.xs.size(); ++i) {
      if (!finite_point(sr, i)) continue;
      ++num_finite;
      xlo = std::min(xlo, sr.xs[i]), xhi = std::max(xhi, sr.xs[i]);
      ylo = std::min(ylo, sr.ys[i]), yhi = std::max(yhi, sr.ys[i]);
    }
  }
  const Range xr = num_finite ? widen(xlo, xhi, 0.02) : Range{0, 1};
  const Range yr = num_finite ? widen(ylo, yhi, 0.06) : Range{0, 1};

  double top = box.y0 + pad;
  if (!panel.title.empty()) {
    std::string t = title.fit(panel.title, box.w() - 2 * pad);
    title.draw(box.x0 + (box.w() - title.width(t)) / 2, top, t, kTitleInk);
    top += title.height() + pad;
  }

  // Y ticks first: their label width sets the left margin.
  const double bottom_margin = tick_len + 0.3 * s + th + pad + (panel.x_label.empty() ? 0 : th + pad);
  const double plot_h_guess = std::max(20.0, box.y1 - bottom_margin - top);
  std::vector<double> yt = nice_ticks(yr.lo, yr.hi, std::max(2, static_cast<int>(plot_h_guess / (4 * s))));
  std::vector<std::string> ylabels = format_ticks(yt);
  double ylab_w = 0;
  for (const auto& l : ylabels) ylab_w = std::max(ylab_w, text.width(l));
  const double left = pad + (panel.y_label.empty() ? 0 : th + pad) + ylab_w + tick_len + 0.3 * s;
  const Box plot{std::floor(box.x0 + left), std::floor(top), std::floor(box.x1 - pad - 1.2 * s),
                 std::floor(box.y1 - bottom_margin)};
  if (plot.w() < 20 || plot.h() < 20) return;  // too small to draw anything useful

  auto px_of = [&](double x) { return plot.x0 + 0.5 + (x - xr.lo) / (xr.hi - xr.lo) * (plot.w() - 1); };
  auto py_of = [&](double y) { return plot.y1 - 0.5 - (y - yr.lo) / (yr.hi - yr.lo) * (plot.h() - 1); };

  // X ticks: as many as fit without labels touching.
  std::vector<double> xt;
  std::vector<std::string> xlabels;
  for (int target = std::max(2, static_cast<int>(plot.w() / (6 * s))); target >= 2; --target) {
    xt = nice_ticks(xr.lo, xr.hi, target);
    xlabels = format_ticks(xt);
    double widest = 0;
    for (const auto& l : xlabels) widest = std::max(widest, text.width(l));
    const double spacing = xt.size() > 1 ? (px_of(xt[1]) - px_of(xt[0])) : 1e9;
    if (widest + s < spacing) break;
  }

  // Grid, frame, ticks and tick labels.
  for (double v : yt) hline(cr, plot.x0, plot.x1, py_of(v), kGrid);
  for (double v : xt) vline(cr, px_of(v), plot.y0, plot.y1, kGrid);
  set_color(cr, kFrame);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, plot.x0 - 0.5, plot.y0 - 0.5, plot.w() + 1, plot.h() + 1);
  cairo_stroke(cr);
  for (size_t i = 0; i < yt.size(); ++i) {
    const double y = std::floor(py_of(yt[i]));
    hline(cr, plot.x0 - 1 - tick_len, plot.x0 - 1, y, kFrame);
    text.draw(plot.x0 - 1 - tick_len - 0.3 * s - text.width(ylabels[i]), y - th / 2, ylabels[i], kTextInk);
  }
  for (size_t i = 0; i < xt.size(); ++i) {
    const double x = std::floor(px_of(xt[i]));
    vline(cr, x, plot.y1 + 1, plot.y1 + 1 + tick_len, kFrame);
    text.draw(x - text.width(xlabels[i]) / 2, plot.y1 + 1 + tick_len + 0.2 * s, xlabels[i], kTextInk);
  }
  if (!panel.x_label.empty()) {
    std::string l = label.fit(panel.x_label, plot.w());
    label.draw(plot.x0 + (plot.w() - label.width(l)) / 2, plot.y1 + 1 + tick_len + 0.2 * s + th + pad / 2, l,
               kTitleInk);
  }
  if (!panel.y_label.empty()) {
    std::string l = label.fit(panel.y_label, plot.h());
    label.draw_vertical(box.x0 + pad, plot.y0 + (plot.h() - label.width(l)) / 2, l, kTitleInk);
  }
  if (num_finite == 0) {
    const std::string msg = "no data";
    title.draw(plot.x0 + (plot.w() - title.width(msg)) / 2, plot.y0 + (plot.h() - title.height()) / 2, msg, kFrame);
  }

  // Series, clipped to the plot: lines between consecutive finite points; markers where
  // points are few or isolated.
  std::vector<Point> drawn;  // every drawn point, for the legend's placement
  cairo_save(cr);
  cairo_rectangle(cr, plot.x0, plot.y0, plot.w(), plot.h());
  cairo_clip(cr);
  cairo_set_line_width(cr, line_width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  for (size_t k = 0; k < panel.series.size(); ++k) {
    const PlotSeries& sr = panel.series[k];
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
    set_color(cr, sr.color.value_or(palette_color(k)));
    for (auto& piece : pieces) {
      if (piece.size() > 4 * static_cast<size_t>(plot.w())) piece = decimate_by_column(piece);
      for (size_t i = 0; i < piece.size(); ++i) {
        i == 0 ? cairo_move_to(cr, piece[i].x, piece[i].y) : cairo_line_to(cr, piece[i].x, piece[i].y);
      }
      cairo_stroke(cr);
      if (markers || piece.size() == 1) {
        for (const Point& p : piece) {
          cairo_new_sub_path(cr);
          cairo_arc(cr, p.x, p.y, line_width / 2 + 1.5, 0, 2 * M_PI);
        }
        cairo_fill(cr);
      }
      drawn.insert(drawn.end(), piece.begin(), piece.end());
    }
  }
  cairo_restore(cr);
  draw_legend(cr, panel, plot, text, line_width, drawn);
}

void draw_figure(cairo_t* cr, const std::vector<PlotPanel>& panels, int width, int height, const PlotOptions& o) {
  set_color(cr, kBackground);
  cairo_paint(cr);
  auto [cols, rows] = plot_grid(static_cast<int>(panels.size()), o.columns);
  const double cell_w = static_cast<double>(width) / cols, cell_h0 = static_cast<double>(height) / rows;
  const double s = o.font_px > 0 ? o.font_px : std::clamp(12.0 * std::min(cell_w / 420, cell_h0 / 300), 12.0, 40.0);
  double top = 0;
  if (!o.title.empty()) {
    const Pen title(cr, 1.4 * s, true);
    std::string t = title.fit(o.title, width - 16);
    title.draw((width - title.width(t)) / 2, 0.8 * s, t, kTitleInk);
    top = std::ceil(0.8 * s + title.height() + 0.6 * s);
  }
  const double cell_h = (height - top) / rows;
  for (size_t i = 0; i < panels.size(); ++i) {
    const int r = static_cast<int>(i) / cols, c = static_cast<int>(i) % cols;
    draw_panel(cr, panels[i], {c * cell_w, top + r * cell_h, (c + 1) * cell_w, top + (r + 1) * cell_h}, s,
               o.line_width);
  }
}

cairo_status_t append_bytes(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

void check(cairo_status_t st, const char* what) {
  if (st != CAIRO_STATUS_SUCCESS) {
    throw Error(std::string("plot: cairo failed to ") + what + ": " + cairo_status_to_string(st),
                "the plot could not be drawn; report this with the metrics file", ErrorCode::kInternal);
  }
}

using SurfacePtr = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextPtr = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

}  // namespace

Rgb palette_color(size_t i) {
  // Ten distinguishable hues that read well on white (in the spirit of common plot palettes).
  static const Rgb kPalette[10] = {{31, 119, 180}, {230, 110, 20}, {44, 160, 44},   {214, 39, 40},
                                   {148, 103, 189}, {140, 86, 75}, {220, 100, 180}, {110, 110, 110},
                                   {170, 170, 30},  {23, 170, 190}};
  return kPalette[i % 10];
}

std::pair<int, int> plot_grid(int num_panels, int columns) {
  int n = std::max(1, num_panels);
  int cols = columns > 0 ? std::min(columns, n) : (n <= 3 ? n : static_cast<int>(std::ceil(std::sqrt(n))));
  return {cols, (n + cols - 1) / cols};
}

PlotFormat plot_format_of(const std::string& path) {
  std::string ext = path.size() >= 4 ? path.substr(path.size() - 4) : "";
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (ext == ".png") return PlotFormat::kPng;
  if (ext == ".svg") return PlotFormat::kSvg;
  throw Error("plot: '" + path + "' is neither a .png nor a .svg file",
              "name the output plot.png (raster) or plot.svg (vector)");
}

std::string render_plots(const std::vector<PlotPanel>& panels, int width, int height, PlotFormat format,
                         const PlotOptions& options) {
  validate(panels, width, height);
  std::string bytes;
  SurfacePtr surface(format == PlotFormat::kPng
                         ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)
                         : cairo_svg_surface_create_for_stream(append_bytes, &bytes, width, height),
                     cairo_surface_destroy);
  check(cairo_surface_status(surface.get()), "create a surface");
  if (format == PlotFormat::kSvg) cairo_svg_surface_set_document_unit(surface.get(), CAIRO_SVG_UNIT_PX);
  {
    ContextPtr cr(cairo_create(surface.get()), cairo_destroy);
    draw_figure(cr.get(), panels, width, height, options);
    check(cairo_status(cr.get()), "draw");
  }
  if (format == PlotFormat::kPng) {
    cairo_surface_flush(surface.get());
    check(cairo_surface_write_to_png_stream(surface.get(), append_bytes, &bytes), "encode the PNG");
  } else {
    cairo_surface_finish(surface.get());  // writes the document's end
    check(cairo_surface_status(surface.get()), "write the SVG");
  }
  return bytes;
}

void write_plots(const std::string& path, const std::vector<PlotPanel>& panels, int width, int height,
                 const PlotOptions& options) {
  write_file_atomic(path, render_plots(panels, width, height, plot_format_of(path), options));
}

}  // namespace moerl
