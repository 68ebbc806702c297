// The bf16 tensor-core product the decode kernels share (expert_gemm.cu, decode_attention.cu):
// c += A[16x16] * B[16x8] with PTX mma.sync m16n8k16 (.row.col, fp32 accumulators). Fragment
// layouts, lane = 4 * g + t: A regs {row g, k 2t..2t+1}, {row g+8, same k}, {row g, k
// 2t+8..}, {row g+8, k 2t+8..}; B regs {k 2t.., col g}, {k 2t+8.., col g}; C {row g, cols 2t,
// 2t+1}, {row g+8, same cols}.
#pragma once

#include <cstdint>

namespace moerl::model::cuda::detail {

__device__ __forceinline__ void mma_m16n8k16(float* c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

}  // namespace moerl::model::cuda::detail
