// Cairo drawing primitives of base/plot (internal to moerl_plot): a color setter, text in
// one font at one size (Pen), and crisp 1-pixel grid lines.
//
//   Pen label(cr, 12, /*bold=*/false);
//   label.draw(x, y, label.fit(name, max_px), kTextInk);
// Text passes through valid_utf8 first: cairo's toy text API puts the context into an error
// state on invalid UTF-8.
#pragma once

#include <cairo.h>

#include <string>

#include "base/plot.h"

namespace moerl::plot_draw {

inline constexpr const char* kFontFamily = "DejaVu Sans";

void set_color(cairo_t* cr, Rgb c, double alpha = 1.0);

// Invalid bytes (and control characters other than tab) become '?'.
std::string valid_utf8(const std::string& s);

// Text in one font at one size, anchored by its top-left corner.
class Pen {
 public:
  Pen(cairo_t* cr, double px, bool bold) : cr_(cr), px_(px), bold_(bold) {}
  double width(const std::string& s) const;
  double height() const;
  void draw(double x, double y, const std::string& s, Rgb color) const;
  // Rotated 90 degrees counter-clockwise (reads bottom to top); (x, y) is the top-left of the
  // rotated box, height() wide and width(s) tall.
  void draw_vertical(double x, double y, const std::string& s, Rgb color) const;
  // `text` shortened with "..." to fit max_px (whole code points).
  std::string fit(const std::string& text, double max_px) const;
  double px() const { return px_; }

 private:
  void use() const;
  cairo_t* cr_;
  double px_;
  bool bold_;
};

// 1-pixel line on the pixel grid (crisp in PNG), horizontal or vertical.
void hline(cairo_t* cr, double x0, double x1, double y, Rgb c);
void vline(cairo_t* cr, double x, double y0, double y1, Rgb c);

}  // namespace moerl::plot_draw
