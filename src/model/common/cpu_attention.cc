// Fused CPU attention core: forward keeps the probabilities for backward; both passes are
// plain loops over (batch, kv head) blocks, parallel over blocks.
#include "model/common/cpu_attention.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <limits>
#include <vector>

#include "base/check.h"

namespace moerl::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct Dims {
  int64_t B, Hq, Hkv, G, T, S, D, Dv;  // D: query/key width, Dv: value width
};

// Eight independent lanes per loop: fixed-width inner loops that compilers vectorize at -O2
// (a single running sum would be one serial chain of dependent adds).
constexpr int64_t kLanes = 8;

template <typename T>
inline T dot(const T* __restrict__ a, const T* __restrict__ b, int64_t n) {
  T acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) acc[j] += a[i + j] * b[i + j];
  }
  T s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

template <typename T>
inline void axpy(T alpha, const T* __restrict__ x, T* __restrict__ y, int64_t n) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int64_t j = 0; j < kLanes; ++j) y[i + j] += alpha * x[i + j];
  }
  for (; i < n; ++i) y[i] += alpha * x[i];
}

// q [B,Hq,T,D], k [B,Hkv,S,D], v [B,Hkv,S,Dv], allowed [B,T,S]; writes out [B,T,Hq,Dv] and
// probs [B,Hq,T,S]
// (a query with no allowed slot gets uniform probabilities).
template <typename T>
void forward_kernel(const Dims& d, const T* q, const T* k, const T* v, const bool* allowed, T scale, T* out,
                    T* probs) {
  at::parallel_for(0, d.B * d.Hkv, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.Hkv, hk = bh % d.Hkv;
      const T* kb = k + bh * d.S * d.D;
      const T* vb = v + bh * d.S * d.Dv;
      for (int64_t g = 0; g < d.G; ++g) {
        const int64_t h = hk * d.G + g;
        for (int64_t t = 0; t < d.T; ++t) {
          const T* qr = q + ((b * d.Hq + h) * d.T + t) * d.D;
          const bool* ok = allowed + (b * d.T + t) * d.S;
          T* p = probs + ((b * d.Hq + h) * d.T + t) * d.S;
          T mx = -std::numeric_limits<T>::infinity();
          bool any = false;
          for (int64_t s = 0; s < d.S; ++s) {
            if (!ok[s]) continue;
            p[s] = dot(qr, kb + s * d.D, d.D) * scale;
            mx = std::max(mx, p[s]);
            any = true;
          }
          if (any) {
            T sum = 0;
            for (int64_t s = 0; s < d.S; ++s) {
              p[s] = ok[s] ? std::exp(p[s] - mx) : T(0);
              sum += p[s];
            }
            const T inv = T(1) / sum;
            for (int64_t s = 0; s < d.S; ++s) p[s] *= inv;
          } else {
            for (int64_t s = 0; s < d.S; ++s) p[s] = T(1) / static_cast<T>(d.S);
          }
          T* o = out + ((b * d.T + t) * d.Hq + h) * d.Dv;
          for (int64_t i = 0; i < d.Dv; ++i) o[i] = 0;
          for (int64_t s = 0; s < d.S; ++s) {
            if (p[s] != T(0)) axpy(p[s], vb + s * d.Dv, o, d.Dv);
          }
        }
      }
    }
  });
}

// dout [B,T,Hq,Dv] -> dq [B,Hq,T,D], dk [B,Hkv,S,D], dv [B,Hkv,S,Dv] (zero-initialised by the
// caller).
template <typename T>
void backward_kernel(const Dims& d, const T* q, const T* k, const T* v, const bool* allowed, const T* probs,
                     const T* dout, T scale, T* dq, T* dk, T* dv) {
  at::parallel_for(0, d.B * d.Hkv, 1, [&](int64_t begin, int64_t end) {
    std::vector<T> ds(d.S);
    for (int64_t bh = begin; bh < end; ++bh) {
      const int64_t b = bh / d.Hkv, hk = bh % d.Hkv;
      const T* kb = k + bh * d.S * d.D;
      const T* vb = v + bh * d.S * d.Dv;
      T* dkb = dk + bh * d.S * d.D;
      T* dvb = dv + bh * d.S * d.Dv;
      for (int64_t g = 0; g < d.G; ++g) {
        const int64_t h = hk * d.G + g;
        for (int64_t t = 0; t < d.T; ++t) {
          const int64_t row = (b * d.Hq + h) * d.T + t;
          const T* p = probs + row * d.S;
          const T* qr = q + row * d.D;
          const T* go = dout + ((b * d.T + t) * d.Hq + h) * d.Dv;
          const bool* ok = allowed + (b * d.T + t) * d.S;
          bool any = false;
          for (int64_t s = 0; s < d.S; ++s) any = any || ok[s];
          T r = 0;
          for (int64_t s = 0; s < d.S; ++s) {
            if (p[s] == T(0)) {
              ds[s] = 0;
              continue;
            }
            axpy(p[s], go, dvb + s * d.Dv, d.Dv);  // dV += P^T dO
            ds[s] = dot(go, vb + s * d.Dv, d.Dv);  // dP = dO V^T
            r += p[s] * ds[s];
          }
          if (!any) continue;  // masked_fill blocks the score gradient of a pad query
          T* dqr = dq + row * d.D;
          for (int64_t s = 0; s < d.S; ++s) {
            if (p[s] == T(0)) continue;
            const T g_s = p[s] * (ds[s] - r) * scale;  // softmax backward, then the scale
            axpy(g_s, kb + s * d.D, dqr, d.D);
            axpy(g_s, qr, dkb + s * d.D, d.D);
          }
        }
      }
    }
  });
}

Dims dims_of(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  Dims d{q.size(0), q.size(1), k.size(1), 0, q.size(2), k.size(2), q.size(3), v.size(3)};
  d.G = d.Hq / d.Hkv;
  return d;
}

class CpuAttentionFn : public torch::autograd::Function<CpuAttentionFn> {
 public:
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q_in, const at::Tensor& k_in,
                               const at::Tensor& v_in, const at::Tensor& allowed_in, double scale) {
    at::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    at::Tensor allowed = allowed_in.contiguous();
    const Dims d = dims_of(q, k, v);
    at::Tensor out = at::empty({d.B, d.T, d.Hq, d.Dv}, q.options());
    at::Tensor probs = at::empty({d.B, d.Hq, d.T, d.S}, q.options());
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "cpu_attention", [&] {
      forward_kernel<scalar_t>(d, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                               allowed.data_ptr<bool>(), static_cast<scalar_t>(scale), out.data_ptr<scalar_t>(),
                               probs.data_ptr<scalar_t>());
    });
    ctx->save_for_backward({q, k, v, allowed, probs});
    ctx->saved_data["scale"] = scale;
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    variable_list saved = ctx->get_saved_variables();
    const at::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &allowed = saved[3], &probs = saved[4];
    const double scale = ctx->saved_data["scale"].toDouble();
    at::Tensor dout = grads[0].contiguous();
    const Dims d = dims_of(q, k, v);
    at::Tensor dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
    AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "cpu_attention_backward", [&] {
      backward_kernel<scalar_t>(d, q.data_ptr<scalar_t>(), k.data_ptr<scalar_t>(), v.data_ptr<scalar_t>(),
                                allowed.data_ptr<bool>(), probs.data_ptr<scalar_t>(), dout.data_ptr<scalar_t>(),
                                static_cast<scalar_t>(scale), dq.data_ptr<scalar_t>(), dk.data_ptr<scalar_t>(),
                                dv.data_ptr<scalar_t>());
    });
    return {dq, dk, dv, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

bool cpu_attention_applies(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD) {
  const at::ScalarType t = q_BhTD.scalar_type();
  return q_BhTD.device().is_cpu() && k_BhSD.device().is_cpu() && (t == at::kFloat || t == at::kDouble) &&
         k_BhSD.scalar_type() == t;
}

at::Tensor cpu_attention(const at::Tensor& q_BhTD, const at::Tensor& k_BhSD, const at::Tensor& v_BhSD,
                         const at::Tensor& allowed_B1TS, double scale) {
  MOERL_CHECK(q_BhTD.dim() == 4 && k_BhSD.dim() == 4 && v_BhSD.dim() == 4 &&
              v_BhSD.sizes().slice(0, 3) == k_BhSD.sizes().slice(0, 3))
      << "cpu_attention: q [B,Hq,T,D], k [B,Hkv,S,D] and v [B,Hkv,S,Dv]";
  MOERL_CHECK(q_BhTD.size(0) == k_BhSD.size(0) && q_BhTD.size(3) == k_BhSD.size(3) &&
              q_BhTD.size(1) % k_BhSD.size(1) == 0)
      << "cpu_attention: batch / head dim / head grouping of q and k differ";
  MOERL_CHECK(allowed_B1TS.scalar_type() == at::kBool && allowed_B1TS.dim() == 4 &&
              allowed_B1TS.size(0) == q_BhTD.size(0) && allowed_B1TS.size(1) == 1 &&
              allowed_B1TS.size(2) == q_BhTD.size(2) && allowed_B1TS.size(3) == k_BhSD.size(2))
      << "cpu_attention: allowed must be bool [B,1,T,S]";
  return CpuAttentionFn::apply(q_BhTD, k_BhSD, v_BhSD, allowed_B1TS, scale)[0];
}

}  // namespace moerl::model
