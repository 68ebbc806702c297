// Line charts as PNG with no external library: panels laid out in a grid, each with a
// title, axes with "nice" tick labels, light grid lines, anti-aliased series lines and a
// legend, all text in the built-in bitmap font (base/font.h).
//
//   PlotPanel reward{"reward", "step", {{"train", steps, rewards}, {"eval", esteps, evals}}};
//   PlotPanel loss{"loss", "step", {{"loss", steps, losses}}};
//   write_png_plots(run_dir + "/plot.png", {reward, loss}, 1200, 480);
//
// Data rules: points whose x or y is NaN/Inf are skipped and break the line there; a
// constant series gets a small symmetric y range around its value; a panel with no finite
// points is drawn with empty axes and "no data". Series without a color take the next
// one of a fixed 10-color palette.
// Thread-safety: pure functions. Failure: bad sizes or no panels throw moerl::Error(kInvalidInput);
// an unwritable path throws Error(kIo).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/png.h"

namespace moerl {

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
  int font_scale = 0;       // tick/legend text scale; 0: from the panel size (titles are +1)
  double line_width = 2.0;  // pixels
  std::string title;        // optional figure title above all panels
};

Image render_plots(const std::vector<PlotPanel>& panels, int width, int height,
                   const PlotOptions& options = {});
void write_png_plots(const std::string& path, const std::vector<PlotPanel>& panels,
                     int width = 1200, int height = 480, const PlotOptions& options = {});

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
