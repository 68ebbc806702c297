// Line charts drawn with cairo, written as PNG or SVG: panels laid out in a grid, each with a
// title, axes with "nice" tick labels, light grid lines, anti-aliased series lines and a
// legend, text in the system's sans-serif font (DejaVu Sans from fonts-dejavu-core).
//
//   PlotPanel reward{"reward", "step", {{"train", steps, rewards}, {"eval", esteps, evals}}};
//   PlotPanel loss{"loss", "step", {{"loss", steps, losses}}};
//   write_plots(run_dir + "/plot.png", {reward, loss}, 1200, 480);   // or plot.svg
//
// Data rules: points whose x or y is NaN/Inf are skipped and break the line there; a
// constant series gets a small symmetric y range around its value; a panel with no finite
// points is drawn with empty axes and "no data". Series without a color take the next
// one of a fixed 10-color palette.
// Thread-safety: pure functions (cairo surfaces are private to each call). Failure: bad
// sizes, no panels or a path that is neither .png nor .svg throw moerl::Error(kInvalidInput);
// an unwritable path throws Error(kIo).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace moerl {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

struct PlotSeries {
  std::string name;
  std::vector<double> xs, ys;  // same length
  std::optional<Rgb> color;    // empty: palette color by position in the panel
};

struct PlotPanel {
  std::string title;
  std::string x_label;
  std::vector<PlotSeries> series;
  std::string y_label;  // optional; drawn vertically left of the tick labels
};

struct PlotOptions {
  int columns = 0;          // panels per row; 0: all in one row up to 3, else a square-ish grid
  double font_px = 0;       // tick/legend text size; 0: from the panel size (titles are larger)
  double line_width = 2.0;  // pixels
  std::string title;        // optional figure title above all panels
};

enum class PlotFormat { kPng, kSvg };
// By the path's extension (".png" or ".svg", any case); anything else is Error(kInvalidInput).
PlotFormat plot_format_of(const std::string& path);

// The bytes of the image file (a PNG or an SVG document) of `panels` at width x height pixels.
std::string render_plots(const std::vector<PlotPanel>& panels, int width, int height, PlotFormat format,
                         const PlotOptions& options = {});
// render_plots in the format of the path's extension, written all or nothing.
void write_plots(const std::string& path, const std::vector<PlotPanel>& panels, int width = 1200,
                 int height = 480, const PlotOptions& options = {});

// Tick positions at multiples of 1, 2, 2.5 or 5 times a power of ten inside [lo, hi],
// about `target` many (at least 3 where the range allows).
std::vector<double> nice_ticks(double lo, double hi, int target);
// Labels for evenly spaced ticks: just enough decimals for the spacing, and one k/M/G
// suffix for the whole axis when its largest label is >= 1e4, or one "e-N" exponent when
// it is < 1e-2.
std::vector<std::string> format_ticks(const std::vector<double>& ticks);
Rgb palette_color(size_t i);
// {columns, rows} of the panel grid render_plots uses for `num_panels` panels.
std::pair<int, int> plot_grid(int num_panels, int columns = 0);

}  // namespace moerl
