// Row movement kernels on raw pointers: gather rows into a contiguous send block, scatter
// received rows into place, and accumulate returned rows (float32 or bfloat16) into a
// float32 sum. Pure functions over caller-owned memory; thread-safe on disjoint outputs.
#pragma once

#include <cstdint>

namespace moerl::ep::kernels {

enum class DType { kFloat32, kBFloat16 };

inline int64_t dtype_size(DType d) { return d == DType::kFloat32 ? 4 : 2; }

// dst[i] = src[rows[i]] for i < n; rows are row_bytes wide.
void gather_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst);
// dst[rows[i]] = src[i] for i < n.
void scatter_rows(const void* src, int64_t row_bytes, const int64_t* rows, int64_t n, void* dst);
// acc[token[i], :] += rows[i, :] (converted to float32), width h, for i < n.
void accumulate_rows(const void* rows, DType dtype, int64_t h, const int64_t* token, int64_t n,
                     float* acc);
// out[i] = in[i] converted from float32 to dtype (round to nearest even for bfloat16).
void convert_from_float(const float* in, int64_t n, DType dtype, void* out);
// The combine reduction in one pass over the output: for each token t < T,
// out[t, :] = 0 + rows_0[row_of[0*T+t]] + rows_1[row_of[1*T+t]] + ... (sources in order,
// a row index < 0 = no contribution), summed in float32 and written once in dtype. Bitwise
// equal to accumulate_rows into a zeroed float32 buffer then convert_from_float, without
// the [T,h] float32 buffer (its zero-fill, read-modify-writes and conversion pass).
void combine_rows(const void* const* rows, const int64_t* row_of, int64_t num_sources, int64_t T, int64_t h,
                  DType dtype, void* out);

}  // namespace moerl::ep::kernels
