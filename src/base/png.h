// PNG encoding with no external library: an 8-bit RGB image buffer, a zlib stream made by a
// small LZ77 + fixed-Huffman deflate (or stored blocks), CRC-32 and Adler-32.
// Decoding is not provided (tests carry their own inflate).
//
//   Image img(640, 480, {255, 255, 255});
//   img.set(10, 20, {200, 0, 0});
//   write_png(img, "out.png");               // throws Error(kIo) naming the path on failure
//
// Thread-safety: all functions are pure except write_png's file write; Image is a plain value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace moerl {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb&) const = default;
};

// Row-major RGB8, (0,0) at the top left. Out-of-range set()/blend() are ignored so that
// drawing code can clip by omission; get() out of range is a CHECK failure.
class Image {
 public:
  Image(int width, int height, Rgb fill = {255, 255, 255});
  int width() const { return width_; }
  int height() const { return height_; }
  Rgb get(int x, int y) const;
  void set(int x, int y, Rgb c);
  // Mixes `c` over the pixel with coverage alpha in [0, 1].
  void blend(int x, int y, Rgb c, double alpha);
  void fill_rect(int x0, int y0, int x1, int y1, Rgb c);  // inclusive-exclusive, clipped
  const std::vector<uint8_t>& rgb() const { return rgb_; }

 private:
  int width_, height_;
  std::vector<uint8_t> rgb_;
};

enum class PngCompression { kStored, kFixedHuffman };

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc = 0);  // PNG/zlib CRC-32
uint32_t adler32(const uint8_t* data, size_t n, uint32_t adler = 1);

// zlib stream (RFC 1950) wrapping a deflate stream (RFC 1951) of `data`.
std::vector<uint8_t> zlib_compress(const uint8_t* data, size_t n, PngCompression mode);

// The bytes of a PNG file: signature, IHDR (RGB8, no interlace), one IDAT, IEND.
std::vector<uint8_t> encode_png(const Image& image,
                                PngCompression mode = PngCompression::kFixedHuffman);
void write_png(const Image& image, const std::string& path,
               PngCompression mode = PngCompression::kFixedHuffman);

}  // namespace moerl
