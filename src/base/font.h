// A built-in 5x8 bitmap font for printable ASCII (glyph cell 6x10 with spacing), drawn at
// an integer scale into an Image. Enough for plot titles, tick labels and legends.
//
//   draw_text(img, 10, 10, "reward", {0, 0, 0}, 2);   // top-left at (10,10), 2x scale
//   int w = text_width("reward", 2);
//
// Characters outside 0x20..0x7E draw as '?'. Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "base/png.h"

namespace moerl {

constexpr int kGlyphWidth = 5;    // ink columns
constexpr int kGlyphHeight = 8;   // rows 0-6 above the baseline, row 7 for descenders
constexpr int kGlyphAdvance = 6;  // horizontal step per character (one column of space)
constexpr int kLineHeight = 10;   // vertical step per line

// Row bits of one glyph, bit 4 = leftmost column.
const uint8_t* glyph_rows(char c);

int text_width(std::string_view text, int scale);  // pixels, without trailing spacing
int text_height(int scale);                         // kGlyphHeight * scale

// Horizontal text, top-left corner at (x, y).
void draw_text(Image& img, int x, int y, std::string_view text, Rgb color, int scale);
// Text rotated 90 degrees counter-clockwise (reads bottom to top), for y-axis labels;
// (x, y) is the top-left of the rotated box, which is text_height wide and text_width tall.
void draw_text_vertical(Image& img, int x, int y, std::string_view text, Rgb color, int scale);

}  // namespace moerl
