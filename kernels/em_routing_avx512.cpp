// AVX-512 EM-routing steps (built with -mavx512f -mavx512vl -mavx512dq -mfma).
// The vector axis is the pose dimension h: 16 floats, one zmm register. exp and
// log are vector polynomials (below) over contiguous runs; the leftovers of a
// run go through the same code with a masked load and store.
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() (deliberately
// uninitialised) and then warn about it (GCC bug 105593): silence that for the
// header only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>

#include "kernels/em_routing.h"
#include "kernels/em_routing_simd.h"

namespace vg {

namespace {

constexpr int H = kPoseDim;

// exp(x) within ~1 ulp (Cephes expf, as the AVX2 variant): x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, ln2 split in two (Cody-Waite); e^r = 1 + r
// + r^2 P(r), P of degree 5; vscalefps applies 2^n with one rounding, so
// denormal results, underflow to 0 (x < -104 is clamped there) and overflow to
// inf come out right. NaN passes through the clamps.
inline __m512 exp16(__m512 x) {
  x = _mm512_min_ps(_mm512_set1_ps(88.8f), _mm512_max_ps(_mm512_set1_ps(-104.f), x));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_add_ps(_mm512_fmadd_ps(p, _mm512_mul_ps(r, r), r), _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// log(x) within ~1 ulp (Cephes logf, as the AVX2 variant): x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) from vgetmantps/vgetexpps (exact, denormals included),
// f = m - 1 exact; log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added
// with ln2 split in two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays.
inline __m512 log16(__m512 x) {
  __m512 m = _mm512_getmant_ps(x, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero);  // [0.5, 1)
  __m512 e = _mm512_add_ps(_mm512_getexp_ps(x), _mm512_set1_ps(1.f));    // x = m 2^e
  const __mmask16 small = _mm512_cmp_ps_mask(m, _mm512_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm512_mask_sub_ps(e, small, e, _mm512_set1_ps(1.f));
  m = _mm512_mask_add_ps(m, small, m, m);
  const __m512 f = _mm512_sub_ps(m, _mm512_set1_ps(1.f));
  const __m512 z = _mm512_mul_ps(f, f);
  __m512 p = _mm512_set1_ps(7.0376836292e-2f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.1514610310e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.1676998740e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.2420140846e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.4249322787e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-1.6668057665e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.0000714765e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(-2.4999993993e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(3.3333331174e-1f));
  __m512 y = _mm512_mul_ps(_mm512_mul_ps(p, f), z);
  y = _mm512_fmadd_ps(e, _mm512_set1_ps(-2.12194440e-4f), y);
  y = _mm512_fmadd_ps(_mm512_set1_ps(-0.5f), z, y);
  __m512 r = _mm512_fmadd_ps(e, _mm512_set1_ps(0.693359375f), _mm512_add_ps(f, y));
  const __m512 zero = _mm512_setzero_ps();
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_EQ_OQ), r, _mm512_set1_ps(-INFINITY));
  r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), r, _mm512_set1_ps(NAN));
  const __mmask16 keep = _mm512_cmp_ps_mask(x, _mm512_set1_ps(INFINITY), _CMP_EQ_OQ) |
                         _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_mask_blend_ps(keep, r, x);
}

// x[k] = exp(x[k]) / log(x[k]) for k < n, sixteen at a time; the last partial
// group is masked (masked-off lanes are neither read nor written).
void exp_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(x + k, exp16(_mm512_loadu_ps(x + k)));
  if (k < n) {
    const __mmask16 t = __mmask16((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(x + k, t, exp16(_mm512_maskz_loadu_ps(t, x + k)));
  }
}
void log_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 16 <= n; k += 16) _mm512_storeu_ps(x + k, log16(_mm512_loadu_ps(x + k)));
  if (k < n) {
    const __mmask16 t = __mmask16((1u << (n - k)) - 1);
    _mm512_mask_storeu_ps(x + k, t, log16(_mm512_maskz_loadu_ps(t, x + k)));
  }
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2)
// (vgetmantps/vgetexpps), so sum log x = log(prod m) + e_sum ln2, and prod m
// < 2^16 cannot overflow (15 products: ~8 ulp, ~1e-6 absolute, the size of
// the rounding of 16 summed logs). If any lane is not normal, positive and
// finite (0, inf, NaN, denormals), the lane-wise log16 is summed instead.
inline float sum_log16(__m512 x) {
  const __mmask16 ok = _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MIN), _CMP_GE_OQ) &
                       _mm512_cmp_ps_mask(x, _mm512_set1_ps(FLT_MAX), _CMP_LE_OQ);
  if (ok != 0xffff) return _mm512_reduce_add_ps(log16(x));
  const float p = _mm512_reduce_mul_ps(_mm512_getmant_ps(x, _MM_MANT_NORM_1_2, _MM_MANT_SIGN_zero));
  const float e_sum = _mm512_reduce_add_ps(_mm512_getexp_ps(x));  // small integers: exact
  return float(double(std::log(p)) + double(e_sum) * std::numbers::ln2);
}

// a = 1 / (1 + exp(-z)) and log a = min(z, 0) - log1p(exp(-|z|)) for n
// contiguous logits z, read from a (the M-step parks them there). log1p(u) for
// u in [0, 1] is log(w) u / (w - 1) with w = 1 + u (w - 1 exact): the rounding
// of 1 + u cancels (Goldberg), leaving ~3 ulp; u itself where w == 1. The last
// partial group is masked.
void activations(float* a, float* log_a, size_t n) {
  const __m512 one = _mm512_set1_ps(1.f), zero = _mm512_setzero_ps();
  const __m512i sign = _mm512_set1_epi32(int(0x80000000u));
  for (size_t k = 0; k < n; k += 16) {
    const __mmask16 t = n - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - k)) - 1);
    const __m512 z = _mm512_maskz_loadu_ps(t, a + k);
    const __m512 u = exp16(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(z), sign)));  // exp(-|z|)
    const __m512 w = _mm512_add_ps(one, u), wm1 = _mm512_sub_ps(w, one);
    const __m512 l1p = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(wm1, zero, _CMP_EQ_OQ),
                                            _mm512_mul_ps(log16(w), _mm512_div_ps(u, wm1)), u);
    _mm512_mask_storeu_ps(log_a + k, t, _mm512_sub_ps(_mm512_min_ps(zero, z), l1p));  // min keeps a NaN z
    const __m512 mz = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(z), sign));
    _mm512_mask_storeu_ps(a + k, t, _mm512_div_ps(one, _mm512_add_ps(one, exp16(mz))));
  }
}

// The M-step's moments of upper capsules j0 .. j0+NJ-1 (NJ independent
// accumulator chains): mu = sum_i w V, sigma2 = max(sum_i w (V - mu)^2, floor),
// and lsum[q] = sum_h log sigma2. v, w, mu, s2: this b's votes, weights, outputs.
template <int NJ>
inline void moments(float* mu, float* s2, float* lsum, const float* v, const float* w, int j0,
                    int I, int J, __m512 s2_min) {
  const size_t stride = size_t(J) * H;  // from capsule i to i+1
  __m512 m[NJ], s[NJ];
  for (int q = 0; q < NJ; ++q) m[q] = s[q] = _mm512_setzero_ps();
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q)
      m[q] = _mm512_fmadd_ps(_mm512_set1_ps(w[i * J + j0 + q]),
                             _mm512_loadu_ps(v + i * stride + (j0 + q) * H), m[q]);
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q) {
      const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(v + i * stride + (j0 + q) * H), m[q]);
      s[q] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_set1_ps(w[i * J + j0 + q]), d), d, s[q]);
    }
  for (int q = 0; q < NJ; ++q) {
    s[q] = _mm512_max_ps(s2_min, s[q]);  // keeps a NaN s2, as std::max(s2, floor) does
    _mm512_storeu_ps(mu + (j0 + q) * H, m[q]);
    _mm512_storeu_ps(s2 + (j0 + q) * H, s[q]);
    lsum[q] = sum_log16(s[q]);
  }
}

constexpr int kRowBuf = 512;

}  // namespace

void em_m_step_f32__avx512(float* mu, float* a_out, EmState& st, const float* V,
                           const float* beta_a, const float* beta_v, int B, int I, int J,
                           const EmConfig& cfg) {
  // Formulas as in em_m_step_f32__scalar (see em_routing.h); w's
  // normalisation multiplies by the reciprocal of its sum.
  const __m512 s2_min = _mm512_set1_ps(cfg.sigma2_min);
  const size_t n = size_t(I) * J;
  for (int b = 0; b < B; ++b) {
    float* w = st.w.data() + size_t(b) * n;  // w[i*J + j]
    const float* log_r = st.log_r.data() + size_t(b) * n;
    const float* log_a = st.log_a_in.data() + size_t(b) * I;
    float* S = st.sum_ra.data() + size_t(b) * J;
    if (!st.frozen) m_step_weights(w, S, log_r, log_a, I, J, cfg.eps, exp_n);

    // Four upper capsules at a time: independent FMA chains hide latency.
    const float* v = V + size_t(b) * n * H;
    float* mu_b = mu + size_t(b) * J * H;
    float* s2_b = st.sigma2.data() + size_t(b) * J * H;
    float* lsum = st.log_s2_sum.data() + size_t(b) * J;
    int j = 0;
    for (; j + 4 <= J; j += 4) {
      moments<4>(mu_b, s2_b, lsum + j, v, w, j, I, J, s2_min);
      for (int q = 0; q < 4; ++q) a_out[size_t(b) * J + j + q] = logit(lsum[j + q], S[j + q], beta_a[j + q], beta_v[j + q], I, cfg);
    }
    for (; j < J; ++j) {
      moments<1>(mu_b, s2_b, lsum + j, v, w, j, I, J, s2_min);
      a_out[size_t(b) * J + j] = logit(lsum[j], S[j], beta_a[j], beta_v[j], I, cfg);
    }
  }
  activations(a_out, st.log_a_out.data(), size_t(B) * J);
}

void em_e_step_f32__avx512(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  // Formulas as in em_e_step_f32__scalar; d^2 / sigma2 multiplies by 1/sigma2.
  const float log_2pi_16 = float(16 * std::log(2.0 * std::numbers::pi));
  alignas(64) float inv_s2[64 * H];
  float norm[64], t[kRowBuf], mx[kRowBuf], lse[kRowBuf];
  const int rows = std::max(1, kRowBuf / J);  // rows i per exp batch
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const __m512 x = _mm512_loadu_ps(st.sigma2.data() + bj * H);
      norm[j] = -0.5f * (sum_log16(x) + log_2pi_16) + st.log_a_out[bj];
      _mm512_store_ps(inv_s2 + j * H, _mm512_div_ps(_mm512_set1_ps(1.f), x));
    }
    for (int i0 = 0; i0 < I; i0 += rows) {
      const int i1 = std::min(I, i0 + rows);
      for (int i = i0; i < i1; ++i) {
        float* lr = st.log_r.data() + (size_t(b) * I + i) * J;
        const float* v = V + (size_t(b) * I + i) * J * H;
        float m = -INFINITY;
        for (int j = 0; j < J; ++j) {
          const __m512 d = _mm512_sub_ps(_mm512_loadu_ps(v + j * H), _mm512_loadu_ps(mu + (size_t(b) * J + j) * H));
          const __m512 q = _mm512_mul_ps(_mm512_mul_ps(d, _mm512_load_ps(inv_s2 + j * H)), d);
          lr[j] = -0.5f * _mm512_reduce_add_ps(q) + norm[j];
          m = std::max(m, lr[j]);
        }
        mx[i - i0] = m;
        for (int j = 0; j < J; ++j) t[(i - i0) * J + j] = lr[j] - m;
      }
      softmax_rows(st.log_r.data() + (size_t(b) * I + i0) * J, t, mx, lse, i1 - i0, J, exp_n, log_n);
    }
  }
}

void em_backward_f32__avx512(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                             const float* da_out, const float* V, const float* mu,
                             const float* a_out, const EmState& st, int B, int I, int J,
                             const EmConfig& cfg) {
  // Formulas as in em_backward_f32__scalar.
  const __m512 s2_min = _mm512_set1_ps(cfg.sigma2_min);
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
      const __m512 x = _mm512_loadu_ps(st.sigma2.data() + bj * H);
      const __m512 g = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(x, s2_min, _CMP_GT_OQ),
                                           _mm512_set1_ps(dcost * S * 0.5f), x);
      const __m512 t = _mm512_add_ps(g, g);
      const __m512 u = _mm512_loadu_ps(mu + bj * H), e = _mm512_loadu_ps(dmu + bj * H);
      for (int i = 0; i < I; ++i) {
        const size_t off = ((size_t(b) * I + i) * J + j) * H;
        const __m512 r = _mm512_fmadd_ps(t, _mm512_sub_ps(_mm512_loadu_ps(V + off), u), e);
        _mm512_storeu_ps(dV + off, _mm512_fmadd_ps(_mm512_set1_ps(st.w[(size_t(b) * I + i) * J + j]), r,
                                                   _mm512_loadu_ps(dV + off)));
      }
    }
}

}  // namespace vg
