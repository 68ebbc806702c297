// The attention core softmax(mask(q k^T * scale)) v as ONE autograd op for CPU float32 /
// float64: loops over (batch, kv head) instead of ATen's batched matmul, which on CPU
// dispatches one small gemm per batch entry (B*Hkv of them, each a few microseconds of
// overhead for the tiny heads of RL policies on CPU). Same math as the eager path in
// attention.cc (masked slots get probability 0; a query with no allowed slot, i.e. a pad
// query, attends uniformly and passes no gradient to q or k).
//
//   if (cpu_attention_applies(q, k)) out_BTHD = cpu_attention(q_BhTD, k_BhSD, v_BhSD, allowed_B1TS, scale);
//
// Thread-safe (pure function; parallel over batch x kv heads with ATen's intra-op pool).
// Failure: MOERL_CHECK on shapes that do not match (callers pass attention()'s tensors).
#pragma once

#include <ATen/ATen.h>

namespace moerl::model {

// True when cpu_attention handles these inputs: CPU tensors of float32 or float64.
bool cpu_attention_applies(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD);

// q [B,Hq,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv] (Hq a multiple of Hkv: query head h reads kv
// head h / (Hq/Hkv); Dv may differ from D, as in MLA), allowed [B,1,T,S] bool. Returns
// [B,T,Hq,Dv] (contiguous), differentiable in q, k and v.
at::Tensor cpu_attention(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                         const at::Tensor& allowed_B1TS, double scale);

}  // namespace moerl::model
