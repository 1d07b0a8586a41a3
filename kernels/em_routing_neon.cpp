// NEON EM-routing steps (AArch64 Advanced SIMD, no extra flags). The vector
// axis is the pose dimension h: 16 floats, four q registers. exp and log are
// vector polynomials (below) over contiguous runs, with a std:: tail.
#include <arm_neon.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>

#include "kernels/em_routing.h"
#include "kernels/em_routing_simd.h"

namespace vg {

namespace {

constexpr int H = kPoseDim;

// Four q registers: one pose vector of 16 floats.
struct F16 {
  float32x4_t q[4];
};
inline F16 load16(const float* p) { return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}}; }
inline void store16(float* p, const F16& x) {
  for (int k = 0; k < 4; ++k) vst1q_f32(p + 4 * k, x.q[k]);
}
inline float hsum16(const F16& x) {
  return vaddvq_f32(vaddq_f32(vaddq_f32(x.q[0], x.q[1]), vaddq_f32(x.q[2], x.q[3])));
}
inline float32x4_t and_mask(uint32x4_t m, float32x4_t x) {
  return vreinterpretq_f32_u32(vandq_u32(m, vreinterpretq_u32_f32(x)));
}

// exp(x) within ~1 ulp (Cephes expf, as the AVX2 variant). Range reduction:
// x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2, ln2 split in two
// (Cody-Waite); e^r = 1 + r + r^2 P(r), P of degree 5. 2^n is applied as
// 2^(n>>1) then 2^(n - n>>1), both normal, so denormal results round once and
// x > ln(FLT_MAX) gives inf. x < -104 gives 0; FMIN/FMAX propagate NaN.
inline float32x4_t exp4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-104.f)), vdupq_n_f32(88.8f));
  const float32x4_t n = vrndnq_f32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vaddq_f32(vfmaq_f32(r, p, vmulq_f32(r, r)), vdupq_n_f32(1.f));
  const int32x4_t ni = vcvtq_s32_f32(n);
  const int32x4_t n1 = vshrq_n_s32(ni, 1), n2 = vsubq_s32(ni, n1);
  const int32x4_t bias = vdupq_n_s32(127);
  const float32x4_t s1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, bias), 23));
  const float32x4_t s2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, bias), 23));
  return vmulq_f32(vmulq_f32(p, s1), s2);
}

// log(x) within ~1 ulp (Cephes logf, as the AVX2 variant): x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first), f = m - 1 exact;
// log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added with ln2 split in
// two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
inline float32x4_t log4(float32x4_t x) {
  const uint32x4_t tiny = vcltq_f32(x, vdupq_n_f32(FLT_MIN));
  const float32x4_t xs = vbslq_f32(tiny, vmulq_f32(x, vdupq_n_f32(8388608.f)), x);
  const uint32x4_t bits = vreinterpretq_u32_f32(xs);
  float32x4_t e = vcvtq_f32_s32(vsubq_s32(
      vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(bits, 23), vdupq_n_u32(0xff))), vdupq_n_s32(126)));
  e = vsubq_f32(e, and_mask(tiny, vdupq_n_f32(23.f)));
  float32x4_t m = vreinterpretq_f32_u32(
      vorrq_u32(vandq_u32(bits, vdupq_n_u32(0x007fffff)), vdupq_n_u32(0x3f000000)));  // [0.5, 1)
  const uint32x4_t small = vcltq_f32(m, vdupq_n_f32(0.707106781186547524f));
  e = vsubq_f32(e, and_mask(small, vdupq_n_f32(1.f)));
  m = vaddq_f32(m, and_mask(small, m));
  const float32x4_t f = vsubq_f32(m, vdupq_n_f32(1.f));
  const float32x4_t z = vmulq_f32(f, f);
  float32x4_t p = vdupq_n_f32(7.0376836292e-2f);
  p = vfmaq_f32(vdupq_n_f32(-1.1514610310e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.1676998740e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-1.2420140846e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(1.4249322787e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-1.6668057665e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(2.0000714765e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(-2.4999993993e-1f), p, f);
  p = vfmaq_f32(vdupq_n_f32(3.3333331174e-1f), p, f);
  float32x4_t y = vmulq_f32(vmulq_f32(p, f), z);
  y = vfmaq_f32(y, e, vdupq_n_f32(-2.12194440e-4f));
  y = vfmaq_f32(y, vdupq_n_f32(-0.5f), z);
  float32x4_t r = vfmaq_f32(vaddq_f32(f, y), e, vdupq_n_f32(0.693359375f));
  r = vbslq_f32(vceqq_f32(x, vdupq_n_f32(0.f)), vdupq_n_f32(-INFINITY), r);
  r = vbslq_f32(vcltq_f32(x, vdupq_n_f32(0.f)), vdupq_n_f32(NAN), r);
  const uint32x4_t keep = vorrq_u32(vceqq_f32(x, vdupq_n_f32(INFINITY)), vmvnq_u32(vceqq_f32(x, x)));
  return vbslq_f32(keep, x, r);
}

// x[k] = exp(x[k]) / log(x[k]) for k < n, four at a time, then a scalar tail.
void exp_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(x + k, exp4(vld1q_f32(x + k)));
  for (; k < n; ++k) x[k] = std::exp(x[k]);
}
void log_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 4 <= n; k += 4) vst1q_f32(x + k, log4(vld1q_f32(x + k)));
  for (; k < n; ++k) x[k] = std::log(x[k]);
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2), so
// sum log x = log(prod m) + e_sum ln2, and prod m < 2^16 cannot overflow
// (15 products: ~8 ulp, ~1e-6 absolute, the size of the rounding of 16 summed
// logs). If any lane is not normal, positive and finite (0, inf, NaN,
// denormals), the lane-wise log4 is summed instead.
inline float sum_log16(const F16& x) {
  const float32x4_t lo = vdupq_n_f32(FLT_MIN), hi = vdupq_n_f32(FLT_MAX);
  uint32x4_t ok = vdupq_n_u32(0xffffffffu);
  for (int k = 0; k < 4; ++k) ok = vandq_u32(ok, vandq_u32(vcgeq_f32(x.q[k], lo), vcleq_f32(x.q[k], hi)));
  if (vminvq_u32(ok) == 0) {
    F16 l;
    for (int k = 0; k < 4; ++k) l.q[k] = log4(x.q[k]);
    return hsum16(l);
  }
  const uint32x4_t mant = vdupq_n_u32(0x007fffff), one = vdupq_n_u32(0x3f800000);
  float32x4_t p = vdupq_n_f32(1.f);
  uint32x4_t e = vdupq_n_u32(0);
  for (int k = 0; k < 4; ++k) {
    const uint32x4_t bits = vreinterpretq_u32_f32(x.q[k]);
    p = vmulq_f32(p, vreinterpretq_f32_u32(vorrq_u32(vandq_u32(bits, mant), one)));
    e = vaddq_u32(e, vshrq_n_u32(bits, 23));  // biased exponents
  }
  const float prod = (vgetq_lane_f32(p, 0) * vgetq_lane_f32(p, 1)) * (vgetq_lane_f32(p, 2) * vgetq_lane_f32(p, 3));
  const int e_sum = int(vaddvq_u32(e)) - 16 * 127;
  return float(double(std::log(prod)) + e_sum * std::numbers::ln2);
}

// a = 1 / (1 + exp(-z)) and log a = min(z, 0) - log1p(exp(-|z|)) for n
// contiguous logits z, read from a (the M-step parks them there). log1p(u) for
// u in [0, 1] is log(w) u / (w - 1) with w = 1 + u (w - 1 exact): the rounding
// of 1 + u cancels (Goldberg), leaving ~3 ulp; u itself where w == 1.
void activations(float* a, float* log_a, size_t n) {
  const float32x4_t one = vdupq_n_f32(1.f), zero = vdupq_n_f32(0.f);
  size_t k = 0;
  for (; k + 4 <= n; k += 4) {
    const float32x4_t z = vld1q_f32(a + k);
    const float32x4_t u = exp4(vnegq_f32(vabsq_f32(z)));  // exp(-|z|)
    const float32x4_t w = vaddq_f32(one, u), wm1 = vsubq_f32(w, one);
    const float32x4_t l1p = vbslq_f32(vceqq_f32(wm1, zero), u, vmulq_f32(log4(w), vdivq_f32(u, wm1)));
    // std::min(z, 0) is z < 0 ? z : 0 (a NaN z stays); FMIN would agree too.
    vst1q_f32(log_a + k, vsubq_f32(vbslq_f32(vcgtq_f32(z, zero), zero, z), l1p));
    vst1q_f32(a + k, vdivq_f32(one, vaddq_f32(one, exp4(vnegq_f32(z)))));
  }
  for (; k < n; ++k) {
    const float z = a[k];
    log_a[k] = std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z)));
    a[k] = 1.f / (1.f + std::exp(-z));
  }
}

// The M-step's moments of upper capsules j0 .. j0+NJ-1 (NJ independent
// accumulator chains): mu = sum_i w V, sigma2 = max(sum_i w (V - mu)^2, floor),
// and lsum[q] = sum_h log sigma2. v, w, mu, s2: this b's votes, weights, outputs.
template <int NJ>
inline void moments(float* mu, float* s2, float* lsum, const float* v, const float* w, int j0,
                    int I, int J, float32x4_t s2_min) {
  const size_t stride = size_t(J) * H;  // from capsule i to i+1
  F16 m[NJ], s[NJ];
  for (int q = 0; q < NJ; ++q)
    for (int k = 0; k < 4; ++k) m[q].q[k] = s[q].q[k] = vdupq_n_f32(0.f);
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q) {
      const float32x4_t wi = vdupq_n_f32(w[i * J + j0 + q]);
      const float* x = v + i * stride + (j0 + q) * H;
      for (int k = 0; k < 4; ++k) m[q].q[k] = vfmaq_f32(m[q].q[k], wi, vld1q_f32(x + 4 * k));
    }
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q) {
      const float32x4_t wi = vdupq_n_f32(w[i * J + j0 + q]);
      const float* x = v + i * stride + (j0 + q) * H;
      for (int k = 0; k < 4; ++k) {
        const float32x4_t d = vsubq_f32(vld1q_f32(x + 4 * k), m[q].q[k]);
        s[q].q[k] = vfmaq_f32(s[q].q[k], vmulq_f32(wi, d), d);
      }
    }
  for (int q = 0; q < NJ; ++q) {
    // FMAX keeps a NaN s2, as std::max(s2, floor) does.
    for (int k = 0; k < 4; ++k) s[q].q[k] = vmaxq_f32(s[q].q[k], s2_min);
    store16(mu + (j0 + q) * H, m[q]);
    store16(s2 + (j0 + q) * H, s[q]);
    lsum[q] = sum_log16(s[q]);
  }
}

constexpr int kRowBuf = 512;

}  // namespace

void em_m_step_f32__neon(float* mu, float* a_out, EmState& st, const float* V,
                         const float* beta_a, const float* beta_v, int B, int I, int J,
                         const EmConfig& cfg) {
  // Formulas as in em_m_step_f32__scalar (see em_routing.h); w's
  // normalisation multiplies by the reciprocal of its sum.
  const float32x4_t s2_min = vdupq_n_f32(cfg.sigma2_min);
  const size_t n = size_t(I) * J;
  for (int b = 0; b < B; ++b) {
    float* w = st.w.data() + size_t(b) * n;  // w[i*J + j]
    const float* log_r = st.log_r.data() + size_t(b) * n;
    const float* log_a = st.log_a_in.data() + size_t(b) * I;
    float* S = st.sum_ra.data() + size_t(b) * J;
    if (!st.frozen) m_step_weights(w, S, log_r, log_a, I, J, cfg.eps, exp_n);

    // Two upper capsules at a time: independent FMA chains hide latency.
    const float* v = V + size_t(b) * n * H;
    float* mu_b = mu + size_t(b) * J * H;
    float* s2_b = st.sigma2.data() + size_t(b) * J * H;
    float* lsum = st.log_s2_sum.data() + size_t(b) * J;
    int j = 0;
    for (; j + 2 <= J; j += 2) {
      moments<2>(mu_b, s2_b, lsum + j, v, w, j, I, J, s2_min);
      for (int q = 0; q < 2; ++q) a_out[size_t(b) * J + j + q] = logit(lsum[j + q], S[j + q], beta_a[j + q], beta_v[j + q], I, cfg);
    }
    for (; j < J; ++j) {
      moments<1>(mu_b, s2_b, lsum + j, v, w, j, I, J, s2_min);
      a_out[size_t(b) * J + j] = logit(lsum[j], S[j], beta_a[j], beta_v[j], I, cfg);
    }
  }
  activations(a_out, st.log_a_out.data(), size_t(B) * J);
}

void em_e_step_f32__neon(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  // Formulas as in em_e_step_f32__scalar; d^2 / sigma2 multiplies by 1/sigma2.
  const float log_2pi_16 = float(16 * std::log(2.0 * std::numbers::pi));
  float inv_s2[64 * H], norm[64], t[kRowBuf], mx[kRowBuf], lse[kRowBuf];
  const int rows = std::max(1, kRowBuf / J);  // rows i per exp batch
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const F16 x = load16(st.sigma2.data() + bj * H);
      F16 inv;
      for (int k = 0; k < 4; ++k) inv.q[k] = vdivq_f32(vdupq_n_f32(1.f), x.q[k]);
      norm[j] = -0.5f * (sum_log16(x) + log_2pi_16) + st.log_a_out[bj];
      store16(inv_s2 + j * H, inv);
    }
    for (int i0 = 0; i0 < I; i0 += rows) {
      const int i1 = std::min(I, i0 + rows);
      for (int i = i0; i < i1; ++i) {
        float* lr = st.log_r.data() + (size_t(b) * I + i) * J;
        const float* v = V + (size_t(b) * I + i) * J * H;
        float m = -INFINITY;
        for (int j = 0; j < J; ++j) {
          const float* u = mu + (size_t(b) * J + j) * H;
          F16 q;
          for (int k = 0; k < 4; ++k) {
            const float32x4_t d = vsubq_f32(vld1q_f32(v + j * H + 4 * k), vld1q_f32(u + 4 * k));
            q.q[k] = vmulq_f32(vmulq_f32(d, vld1q_f32(inv_s2 + j * H + 4 * k)), d);
          }
          lr[j] = -0.5f * hsum16(q) + norm[j];
          m = std::max(m, lr[j]);
        }
        mx[i - i0] = m;
        for (int j = 0; j < J; ++j) t[(i - i0) * J + j] = lr[j] - m;
      }
      softmax_rows(st.log_r.data() + (size_t(b) * I + i0) * J, t, mx, lse, i1 - i0, J, exp_n, log_n);
    }
  }
}

void em_backward_f32__neon(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                           const float* da_out, const float* V, const float* mu,
                           const float* a_out, const EmState& st, int B, int I, int J,
                           const EmConfig& cfg) {
  // Formulas as in em_backward_f32__scalar.
  const float32x4_t s2_min = vdupq_n_f32(cfg.sigma2_min);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const float a = a_out[bj];
      const float dz = da_out[bj] * a * (1.f - a);
      dbeta_a[j] += cfg.lambda * dz;
      const float dcost = -cfg.lambda * dz;
      // The factor of (16 beta_v + L/2) in the cost: S, or S / I with cost_norm.
      const float S = cfg.cost_norm ? st.sum_ra[bj] / float(I) : st.sum_ra[bj];
      dbeta_v[j] += float(H) * S * dcost;
      // 2 dsigma2 = 2 (dcost S / 2) / sigma2, 0 where sigma2 sits at its floor.
      const float32x4_t c = vdupq_n_f32(dcost * S * 0.5f);
      const F16 x = load16(st.sigma2.data() + bj * H), u = load16(mu + bj * H), e = load16(dmu + bj * H);
      F16 t;
      for (int k = 0; k < 4; ++k) {
        const float32x4_t g = and_mask(vcgtq_f32(x.q[k], s2_min), vdivq_f32(c, x.q[k]));
        t.q[k] = vaddq_f32(g, g);
      }
      for (int i = 0; i < I; ++i) {
        const float32x4_t wi = vdupq_n_f32(st.w[(size_t(b) * I + i) * J + j]);
        const size_t off = ((size_t(b) * I + i) * J + j) * H;
        for (int k = 0; k < 4; ++k) {
          const float32x4_t r = vfmaq_f32(e.q[k], t.q[k], vsubq_f32(vld1q_f32(V + off + 4 * k), u.q[k]));
          vst1q_f32(dV + off + 4 * k, vfmaq_f32(vld1q_f32(dV + off + 4 * k), wi, r));
        }
      }
    }
}

}  // namespace vg
