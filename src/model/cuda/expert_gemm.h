// Expert products for few rows per expert (the decode step): out[r] = a[src(r)] @ w[e]^T for
// the rows r of each expert e's group, with bf16 tensor cores (mma.sync m16n8k16, fp32
// accumulation) and every touched expert's weights streamed once from HBM.
//
// At decode sizes (batch 256, top-8 of 128 experts: ~16 rows per expert) at::_grouped_mm
// runs CUTLASS tiles of 64 rows in clusters of two; this kernel instead gives each CTA one
// expert and 128 output columns, reads the weights with streaming 16-byte loads straight into
// the MMA fragments (each lane's 8 consecutive k serve two k16 steps: the A rows use the same
// permutation of k, so the dot products are unchanged), skips experts with no rows, gathers
// the input rows through `a_rows` (no packed copy of the tokens) and can fuse SwiGLU into the
// gate/up product (no [M,2I] intermediate). Rows are processed 32 at a time; an expert with
// more rows streams its weights again per 32 (rare at decode sizes; prefill keeps
// at::_grouped_mm). Each output row depends only on its own input row, so results do not
// depend on the batch.
//
//   expert_plan(idx, w, true, T, K, E, offs, src_token, pos, w_f32, stream);
//   if (expert_gemm_fits(I, H, true))
//     expert_gemm(x, src_token, w13, offs, E, I, H, /*swiglu=*/true, h, stream);   // h [M,I]
//   expert_gemm(h, nullptr, w2, offs, E, H, I, false, y, stream);                  // y [M,H]
//
// a: bf16 rows of length k (row-major, 16-byte aligned); a_rows: int64 source row of each
// output row, or null (row r reads a[r]); w: bf16 [E, n_w, k] (nn.Linear layout; n_w = 2 *
// n_out with swiglu: gate rows then up rows); offs: int32 [E] cumulative group ends (rows past
// offs[E-1] are not written); out: bf16 [rows, n_out]. Enqueued on `stream`, no sync.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace moerl::model::cuda {

// The rows plan of the decode path in one launch (in place of sort_by_expert's sort and the
// weight casts): from idx int64 [T,K] (-1 or ids outside [0, E): dropped) and the gate weights
// (bf16 or float32 [T,K]), offs int32 [E] (group ends), src_token int64 [M] (source token of
// each row; rows past offs[E-1] unset), pos int64 [T,K] (row of each entry, -1 if dropped),
// weight_f32 [T,K] (0 if dropped). E at most kExpertPlanMaxExperts. Rows inside a group are
// in no set order.
constexpr int64_t kExpertPlanMaxExperts = 1024;
cudaError_t expert_plan(const int64_t* idx, const void* weight, bool weight_bf16, int64_t tokens, int64_t k,
                        int64_t experts, int32_t* offs, int64_t* src_token, int64_t* pos, float* weight_f32,
                        cudaStream_t stream);

// Whether expert_gemm takes these sizes: k a multiple of 64, n_out of 32 (16 with swiglu).
bool expert_gemm_fits(int64_t n_out, int64_t k, bool swiglu);
// Rows per expert (mean) up to which expert_gemm is the decode path's choice.
constexpr int64_t kExpertGemmMaxMeanRows = 24;

cudaError_t expert_gemm(const void* a, const int64_t* a_rows, const void* w, const int32_t* offs, int64_t experts,
                        int64_t n_out, int64_t k, bool swiglu, void* out, cudaStream_t stream);

}  // namespace moerl::model::cuda
