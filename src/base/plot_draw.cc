// Cairo text and line primitives of base/plot.
#include "base/plot_draw.h"

#include <cmath>

namespace moerl::plot_draw {

void set_color(cairo_t* cr, Rgb c, double alpha) {
  cairo_set_source_rgba(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0, alpha);
}

std::string valid_utf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && (n > 1 || c >= 0x20 || c == '\t');
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

double Pen::width(const std::string& s) const {
  use();
  cairo_text_extents_t e;
  cairo_text_extents(cr_, valid_utf8(s).c_str(), &e);
  return e.x_advance;
}

double Pen::height() const {
  use();
  cairo_font_extents_t f;
  cairo_font_extents(cr_, &f);
  return f.ascent + f.descent;
}

void Pen::draw(double x, double y, const std::string& s, Rgb color) const {
  use();
  cairo_font_extents_t f;
  cairo_font_extents(cr_, &f);
  set_color(cr_, color);
  cairo_move_to(cr_, x, y + f.ascent);
  cairo_show_text(cr_, valid_utf8(s).c_str());
}

void Pen::draw_vertical(double x, double y, const std::string& s, Rgb color) const {
  cairo_save(cr_);
  cairo_translate(cr_, x, y + width(s));
  cairo_rotate(cr_, -M_PI / 2);
  draw(0, 0, s, color);
  cairo_restore(cr_);
}

std::string Pen::fit(const std::string& text, double max_px) const {
  if (width(text) <= max_px) return text;
  std::string t = valid_utf8(text);
  while (!t.empty() && width(t + "...") > max_px) {
    t.pop_back();
    while (!t.empty() && (static_cast<unsigned char>(t.back()) >> 6) == 2) t.pop_back();  // whole code points
    if (!t.empty() && static_cast<unsigned char>(t.back()) >= 0xC0) t.pop_back();
  }
  return t.empty() ? "" : t + "...";
}

void Pen::use() const {
  cairo_select_font_face(cr_, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold_ ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr_, px_);
}

void hline(cairo_t* cr, double x0, double x1, double y, Rgb c) {
  set_color(cr, c);
  cairo_rectangle(cr, std::floor(x0), std::floor(y), std::floor(x1) - std::floor(x0), 1);
  cairo_fill(cr);
}

void vline(cairo_t* cr, double x, double y0, double y1, Rgb c) {
  set_color(cr, c);
  cairo_rectangle(cr, std::floor(x), std::floor(y0), 1, std::floor(y1) - std::floor(y0));
  cairo_fill(cr);
}

}  // namespace moerl::plot_draw
