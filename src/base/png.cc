// PNG encoder: RGB image buffer, per-row filter choice, zlib stream with a greedy LZ77 +
// fixed-Huffman deflate (RFC 1951 section 3.2.6) or stored blocks, chunk CRCs.
#include "base/png.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>

#include "base/check.h"
#include "base/error.h"
#include "base/files.h"

namespace moerl {

Image::Image(int width, int height, Rgb fill) : width_(width), height_(height) {
  if (width <= 0 || height <= 0 || width > 16384 || height > 16384) {
    throw Error("image size " + std::to_string(width) + "x" + std::to_string(height) +
                    " is out of range",
                "width and height must be between 1 and 16384 pixels");
  }
  rgb_.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < rgb_.size(); i += 3) {
    rgb_[i] = fill.r;
    rgb_[i + 1] = fill.g;
    rgb_[i + 2] = fill.b;
  }
}

Rgb Image::get(int x, int y) const {
  MOERL_CHECK(x >= 0 && y >= 0 && x < width_ && y < height_) << x << "," << y;
  const uint8_t* p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
  return {p[0], p[1], p[2]};
}

void Image::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  uint8_t* p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
}

void Image::blend(int x, int y, Rgb c, double alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || !(alpha > 0)) return;
  if (alpha >= 1) {
    set(x, y, c);
    return;
  }
  uint8_t* p = &rgb_[(static_cast<size_t>(y) * width_ + x) * 3];
  auto mix = [alpha](uint8_t bg, uint8_t fg) {
    return static_cast<uint8_t>(std::lround(bg + (fg - bg) * alpha));
  };
  p[0] = mix(p[0], c.r);
  p[1] = mix(p[1], c.g);
  p[2] = mix(p[2], c.b);
}

void Image::fill_rect(int x0, int y0, int x1, int y1, Rgb c) {
  x0 = std::max(x0, 0);
  y0 = std::max(y0, 0);
  x1 = std::min(x1, width_);
  y1 = std::min(y1, height_);
  for (int y = y0; y < y1; ++y) {
    for (int x = x0; x < x1; ++x) set(x, y, c);
  }
}

uint32_t crc32(const uint8_t* data, size_t n, uint32_t crc) {
  static const std::array<uint32_t, 256> kTable = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  crc = ~crc;
  for (size_t i = 0; i < n; ++i) crc = kTable[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t adler32(const uint8_t* data, size_t n, uint32_t adler) {
  uint32_t a = adler & 0xFFFF, b = adler >> 16;
  while (n > 0) {
    size_t chunk = std::min<size_t>(n, 5552);  // largest run before the sums can overflow
    for (size_t i = 0; i < chunk; ++i) {
      a += data[i];
      b += a;
    }
    a %= 65521;
    b %= 65521;
    data += chunk;
    n -= chunk;
  }
  return (b << 16) | a;
}

namespace {

// Deflate bit order: values go out least significant bit first.
class BitWriter {
 public:
  explicit BitWriter(std::vector<uint8_t>& out) : out_(out) {}
  void bits(uint32_t value, int count) {
    acc_ |= static_cast<uint64_t>(value) << nbits_;
    nbits_ += count;
    while (nbits_ >= 8) {
      out_.push_back(static_cast<uint8_t>(acc_));
      acc_ >>= 8;
      nbits_ -= 8;
    }
  }
  // Huffman codes are defined most significant bit first, so they go out reversed.
  void code(uint32_t code, int len) {
    uint32_t rev = 0;
    for (int i = 0; i < len; ++i) rev |= ((code >> i) & 1u) << (len - 1 - i);
    bits(rev, len);
  }
  void align() {
    if (nbits_ > 0) bits(0, 8 - nbits_);
  }

 private:
  std::vector<uint8_t>& out_;
  uint64_t acc_ = 0;
  int nbits_ = 0;
};

void put_literal(BitWriter& w, int sym) {
  if (sym < 144) {
    w.code(0x30 + sym, 8);
  } else if (sym < 256) {
    w.code(0x190 + (sym - 144), 9);
  } else if (sym < 280) {
    w.code(sym - 256, 7);
  } else {
    w.code(0xC0 + (sym - 280), 8);
  }
}

constexpr int kLenBase[29] = {3,  4,  5,  6,  7,  8,  9,  10, 11,  13,  15,  17,  19,  23, 27,
                              31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
constexpr int kLenExtra[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2,
                               2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
constexpr int kDistBase[30] = {1,    2,    3,    4,    5,    7,     9,     13,    17,  25,
                               33,   49,   65,   97,   129,  193,   257,   385,   513, 769,
                               1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
constexpr int kDistExtra[30] = {0, 0, 0, 0, 1, 1, 2, 2,  3,  3,  4,  4,  5,  5,  6,
                                6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

void put_match(BitWriter& w, int len, int dist) {
  int li = static_cast<int>(std::upper_bound(kLenBase, kLenBase + 29, len) - kLenBase) - 1;
  put_literal(w, 257 + li);
  if (kLenExtra[li] > 0) w.bits(static_cast<uint32_t>(len - kLenBase[li]), kLenExtra[li]);
  int di = static_cast<int>(std::upper_bound(kDistBase, kDistBase + 30, dist) - kDistBase) - 1;
  w.code(static_cast<uint32_t>(di), 5);
  if (kDistExtra[di] > 0) w.bits(static_cast<uint32_t>(dist - kDistBase[di]), kDistExtra[di]);
}

// One final fixed-Huffman block; greedy matching over a hash chain.
void deflate_fixed(const uint8_t* data, size_t n, std::vector<uint8_t>& out) {
  constexpr int kWindow = 32768, kMinMatch = 3, kMaxMatch = 258, kMaxChain = 48;
  constexpr int kHashBits = 15;
  BitWriter w(out);
  w.bits(1, 1);  // BFINAL
  w.bits(1, 2);  // BTYPE = 01, fixed Huffman
  std::vector<int64_t> head(size_t{1} << kHashBits, -1);
  std::vector<int64_t> prev(kWindow, -1);
  auto hash = [data](size_t i) {
    uint32_t v = (uint32_t{data[i]} << 16) | (uint32_t{data[i + 1]} << 8) | data[i + 2];
    return (v * 2654435761u) >> (32 - kHashBits);
  };
  auto insert = [&](size_t i) {
    if (i + kMinMatch > n) return;
    uint32_t h = hash(i);
    prev[i % kWindow] = head[h];
    head[h] = static_cast<int64_t>(i);
  };
  size_t i = 0;
  while (i < n) {
    int best_len = 0;
    size_t best_dist = 0;
    if (i + kMinMatch <= n) {
      size_t max_len = std::min<size_t>(kMaxMatch, n - i);
      int64_t cand = head[hash(i)];
      for (int chain = 0; cand >= 0 && chain < kMaxChain; ++chain) {
        size_t dist = i - static_cast<size_t>(cand);
        if (dist > kWindow) break;
        size_t len = 0;
        while (len < max_len && data[cand + len] == data[i + len]) ++len;
        if (static_cast<int>(len) > best_len) {
          best_len = static_cast<int>(len);
          best_dist = dist;
          if (len == max_len) break;
        }
        int64_t next = prev[static_cast<size_t>(cand) % kWindow];
        if (next >= cand) break;  // slot was overwritten by a newer position
        cand = next;
      }
    }
    if (best_len >= kMinMatch) {
      put_match(w, best_len, static_cast<int>(best_dist));
      for (int k = 0; k < best_len; ++k) insert(i + k);
      i += static_cast<size_t>(best_len);
    } else {
      put_literal(w, data[i]);
      insert(i);
      ++i;
    }
  }
  put_literal(w, 256);  // end of block
  w.align();
}

void deflate_stored(const uint8_t* data, size_t n, std::vector<uint8_t>& out) {
  size_t pos = 0;
  do {
    size_t len = std::min<size_t>(n - pos, 65535);
    bool final = pos + len == n;
    out.push_back(final ? 1 : 0);  // BFINAL, BTYPE = 00, then padding to the byte
    out.push_back(static_cast<uint8_t>(len));
    out.push_back(static_cast<uint8_t>(len >> 8));
    out.push_back(static_cast<uint8_t>(~len));
    out.push_back(static_cast<uint8_t>(~len >> 8));
    out.insert(out.end(), data + pos, data + pos + len);
    pos += len;
  } while (pos < n);
}

void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<uint8_t>(v >> s));
}

void put_chunk(std::vector<uint8_t>& out, const char type[4], const std::vector<uint8_t>& body) {
  put_be32(out, static_cast<uint32_t>(body.size()));
  size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), body.begin(), body.end());
  put_be32(out, crc32(out.data() + start, out.size() - start));
}

// PNG filter rows: per row, the filter (None, Sub, Up) with the smallest sum of |signed
// bytes|, the usual heuristic; flat backgrounds become runs of zeros.
std::vector<uint8_t> filtered_scanlines(const Image& img) {
  const size_t stride = static_cast<size_t>(img.width()) * 3;
  const uint8_t* px = img.rgb().data();
  std::vector<uint8_t> raw;
  raw.reserve((stride + 1) * img.height());
  std::vector<uint8_t> cand[3];
  for (auto& c : cand) c.resize(stride);
  for (int y = 0; y < img.height(); ++y) {
    const uint8_t* row = px + y * stride;
    const uint8_t* up = y > 0 ? row - stride : nullptr;
    for (size_t i = 0; i < stride; ++i) {
      cand[0][i] = row[i];
      cand[1][i] = static_cast<uint8_t>(row[i] - (i >= 3 ? row[i - 3] : 0));
      cand[2][i] = static_cast<uint8_t>(row[i] - (up ? up[i] : 0));
    }
    int best = 0;
    uint64_t best_cost = UINT64_MAX;
    for (int f = 0; f < 3; ++f) {
      uint64_t cost = 0;
      for (uint8_t b : cand[f]) cost += b < 128 ? b : 256 - b;
      if (cost < best_cost) {
        best_cost = cost;
        best = f;
      }
    }
    raw.push_back(static_cast<uint8_t>(best));
    raw.insert(raw.end(), cand[best].begin(), cand[best].end());
  }
  return raw;
}

}  // namespace

std::vector<uint8_t> zlib_compress(const uint8_t* data, size_t n, PngCompression mode) {
  std::vector<uint8_t> out = {0x78, 0x01};  // deflate, 32K window; (0x7801 % 31) == 0
  if (mode == PngCompression::kStored) {
    deflate_stored(data, n, out);
  } else {
    deflate_fixed(data, n, out);
  }
  put_be32(out, adler32(data, n));
  return out;
}

std::vector<uint8_t> encode_png(const Image& image, PngCompression mode) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  std::vector<uint8_t> out(kSignature, kSignature + 8);
  std::vector<uint8_t> ihdr;
  put_be32(ihdr, static_cast<uint32_t>(image.width()));
  put_be32(ihdr, static_cast<uint32_t>(image.height()));
  ihdr.insert(ihdr.end(), {8, 2, 0, 0, 0});  // 8-bit, truecolor, deflate, adaptive, no interlace
  put_chunk(out, "IHDR", ihdr);
  std::vector<uint8_t> raw = filtered_scanlines(image);
  put_chunk(out, "IDAT", zlib_compress(raw.data(), raw.size(), mode));
  put_chunk(out, "IEND", {});
  return out;
}

void write_png(const Image& image, const std::string& path, PngCompression mode) {
  std::vector<uint8_t> bytes = encode_png(image, mode);
  // A reader never sees half a PNG.
  write_file_atomic(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace moerl
