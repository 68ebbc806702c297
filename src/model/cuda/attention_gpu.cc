// fused_attention: kv heads shared by expansion, one scaled_dot_product_attention under the
// mask, then the rows with no allowed slot set to the mean of the values (uniform weights).
#include "model/cuda/attention_gpu.h"

#include "model/common/attention.h"

namespace moerl::model::cuda {
namespace {

// [B,Hkv,S,D] -> [B,Hkv*G,S,D] with query head h reading kv head h / G.
at::Tensor share_heads(const at::Tensor& x, int64_t G) {
  if (G == 1) return x;
  const int64_t B = x.size(0), Hkv = x.size(1), S = x.size(2), D = x.size(3);
  return x.unsqueeze(2).expand({B, Hkv, G, S, D}).reshape({B, Hkv * G, S, D});
}

}  // namespace

at::Tensor fused_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                           const at::Tensor& allowed_B1TS, double scale) {
  const at::ScalarType dt = q.scalar_type();
  if (!q.is_cuda() || (dt != at::kBFloat16 && dt != at::kHalf) || keys.scalar_type() != dt ||
      values.scalar_type() != dt || q.size(1) % keys.size(1) != 0) {
    return at::Tensor();
  }
  // A query with no allowed slot (a pad) attends uniformly over every slot (attention_core's
  // contract): its row is unmasked for the kernel (an all-masked row gives NaN), then replaced
  // by the mean of the values, which also stops gradients to its q and k as the blocks do.
  const at::Tensor empty = allowed_B1TS.any(-1, /*keepdim=*/true).logical_not();  // [B,1,T,1]
  const int64_t G = q.size(1) / keys.size(1);
  at::Tensor out = at::scaled_dot_product_attention(q, share_heads(keys, G), share_heads(values, G),
                                                    allowed_B1TS.logical_or(empty), /*dropout_p=*/0.0,
                                                    /*is_causal=*/false, scale);  // [B,Hq,T,Dv]
  out = at::where(empty, share_heads(values.mean(2, /*keepdim=*/true), G), out);
  return out.transpose(1, 2);  // [B,T,Hq,Dv]
}

void install_cuda_attention() { set_attention_hook(&fused_attention); }

}  // namespace moerl::model::cuda
