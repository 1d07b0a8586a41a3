// AVX2 + FMA EM-routing steps (built with -mavx2 -mfma). The vector axis is
// the pose dimension h: 16 floats, two ymm registers. exp and log are vector
// polynomials (below) over contiguous runs, with a std:: tail.
#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>

#include "kernels/em_routing.h"
#include "kernels/em_routing_simd.h"

namespace vg {

namespace {

constexpr int H = kPoseDim;

// exp(x) within ~1 ulp (Cephes expf). Range reduction: x = n ln2 + r with
// n = round(x / ln2), |r| <= ln2/2, ln2 split in two (Cody-Waite) so n ln2 is
// exact; e^r = 1 + r + r^2 P(r), P of degree 5. 2^n is applied as 2^(n>>1) then
// 2^(n - n>>1), both normal, so results in the denormal range round once and
// x > ln(FLT_MAX) gives inf. x < -104 gives 0; NaN passes through the clamps.
inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_set1_ps(88.8f), _mm256_max_ps(_mm256_set1_ps(-104.f), x));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.f));
  const __m256i ni = _mm256_cvtps_epi32(n);
  const __m256i n1 = _mm256_srai_epi32(ni, 1), n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

// log(x) within ~1 ulp (Cephes logf). Range reduction: x = m 2^e with m in
// [sqrt(1/2), sqrt(2)) (denormals scaled by 2^23 first), f = m - 1 exact;
// log(1+f) = f - f^2/2 + f^3 P(f), P of degree 8; e ln2 added with ln2 split in
// two. log(0) = -inf, log(<0) = NaN, log(inf) = inf, NaN stays NaN.
inline __m256 log8(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(FLT_MIN), _CMP_LT_OQ);
  const __m256 xs = _mm256_blendv_ps(x, _mm256_mul_ps(x, _mm256_set1_ps(8388608.f)), tiny);
  const __m256i bits = _mm256_castps_si256(xs);
  __m256 e = _mm256_cvtepi32_ps(_mm256_sub_epi32(
      _mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xff)), _mm256_set1_epi32(126)));
  e = _mm256_sub_ps(e, _mm256_and_ps(tiny, _mm256_set1_ps(23.f)));
  __m256 m = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000)));  // [0.5, 1)
  const __m256 small = _mm256_cmp_ps(m, _mm256_set1_ps(0.707106781186547524f), _CMP_LT_OQ);
  e = _mm256_sub_ps(e, _mm256_and_ps(small, _mm256_set1_ps(1.f)));
  m = _mm256_add_ps(m, _mm256_and_ps(small, m));
  const __m256 f = _mm256_sub_ps(m, _mm256_set1_ps(1.f));
  const __m256 z = _mm256_mul_ps(f, f);
  __m256 p = _mm256_set1_ps(7.0376836292e-2f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.1514610310e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.1676998740e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.2420140846e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.4249322787e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-1.6668057665e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.0000714765e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(-2.4999993993e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(3.3333331174e-1f));
  __m256 y = _mm256_mul_ps(_mm256_mul_ps(p, f), z);
  y = _mm256_fmadd_ps(e, _mm256_set1_ps(-2.12194440e-4f), y);
  y = _mm256_fmadd_ps(_mm256_set1_ps(-0.5f), z, y);
  __m256 r = _mm256_fmadd_ps(e, _mm256_set1_ps(0.693359375f), _mm256_add_ps(f, y));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(-INFINITY), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ));
  r = _mm256_blendv_ps(r, _mm256_set1_ps(NAN), _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
  const __m256 keep = _mm256_or_ps(_mm256_cmp_ps(x, _mm256_set1_ps(INFINITY), _CMP_EQ_OQ),
                                   _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  return _mm256_blendv_ps(r, x, keep);
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// sum_h log x_h over 16 floats with one log: x = m 2^e with m in [1, 2), so
// sum log x = log(prod m) + e_sum ln2, and prod m < 2^16 cannot overflow
// (15 products: ~8 ulp of the product, i.e. ~1e-6 absolute, the size of the
// rounding of 16 summed logs). Lanes not normal, positive and finite (0, inf,
// NaN, denormals) take the lane-wise log8.
inline float sum_log16(__m256 x0, __m256 x1) {
  const __m256 lo = _mm256_set1_ps(FLT_MIN), hi = _mm256_set1_ps(FLT_MAX);
  const __m256 ok = _mm256_and_ps(
      _mm256_and_ps(_mm256_cmp_ps(x0, lo, _CMP_GE_OQ), _mm256_cmp_ps(x0, hi, _CMP_LE_OQ)),
      _mm256_and_ps(_mm256_cmp_ps(x1, lo, _CMP_GE_OQ), _mm256_cmp_ps(x1, hi, _CMP_LE_OQ)));
  if (_mm256_movemask_ps(ok) != 0xff) return hsum(_mm256_add_ps(log8(x0), log8(x1)));
  const __m256i b0 = _mm256_castps_si256(x0), b1 = _mm256_castps_si256(x1);
  const __m256i mant = _mm256_set1_epi32(0x007fffff), one = _mm256_set1_epi32(0x3f800000);
  const __m256 p8 = _mm256_mul_ps(_mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b0, mant), one)),
                                  _mm256_castsi256_ps(_mm256_or_si256(_mm256_and_si256(b1, mant), one)));
  const __m256i e8 = _mm256_add_epi32(_mm256_srli_epi32(b0, 23), _mm256_srli_epi32(b1, 23));  // biased
  __m128 p = _mm_mul_ps(_mm256_castps256_ps128(p8), _mm256_extractf128_ps(p8, 1));
  p = _mm_mul_ps(p, _mm_movehl_ps(p, p));
  p = _mm_mul_ss(p, _mm_movehdup_ps(p));
  __m128i e = _mm_add_epi32(_mm256_castsi256_si128(e8), _mm256_extracti128_si256(e8, 1));
  e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0x4E));
  e = _mm_add_epi32(e, _mm_shuffle_epi32(e, 0xB1));
  const int e_sum = _mm_cvtsi128_si32(e) - 16 * 127;
  return float(double(std::log(_mm_cvtss_f32(p))) + e_sum * std::numbers::ln2);
}

// x[k] = exp(x[k]) / log(x[k]) for k < n, eight at a time, then a scalar tail.
void exp_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(x + k, exp8(_mm256_loadu_ps(x + k)));
  for (; k < n; ++k) x[k] = std::exp(x[k]);
}
void log_n(float* x, size_t n) {
  size_t k = 0;
  for (; k + 8 <= n; k += 8) _mm256_storeu_ps(x + k, log8(_mm256_loadu_ps(x + k)));
  for (; k < n; ++k) x[k] = std::log(x[k]);
}

// a = 1 / (1 + exp(-z)) and log a = min(z, 0) - log1p(exp(-|z|)) for n
// contiguous logits z, read from a (the M-step parks them there). log1p(u) for
// u in [0, 1] is log(w) u / (w - 1) with w = 1 + u (w - 1 exact): the rounding
// of 1 + u cancels (Goldberg), leaving ~3 ulp; u itself where w == 1.
void activations(float* a, float* log_a, size_t n) {
  const __m256 one = _mm256_set1_ps(1.f), zero = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.f);
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 z = _mm256_loadu_ps(a + k);
    const __m256 u = exp8(_mm256_or_ps(z, sign));  // exp(-|z|)
    const __m256 w = _mm256_add_ps(one, u), wm1 = _mm256_sub_ps(w, one);
    const __m256 l1p = _mm256_blendv_ps(_mm256_mul_ps(log8(w), _mm256_div_ps(u, wm1)), u,
                                        _mm256_cmp_ps(wm1, zero, _CMP_EQ_OQ));
    _mm256_storeu_ps(log_a + k, _mm256_sub_ps(_mm256_min_ps(zero, z), l1p));  // min keeps a NaN z
    _mm256_storeu_ps(a + k, _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_xor_ps(z, sign)))));
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
                    int I, int J, __m256 s2_min) {
  const size_t stride = size_t(J) * H;  // from capsule i to i+1
  __m256 m[NJ][2], s[NJ][2];
  for (int q = 0; q < NJ; ++q) m[q][0] = m[q][1] = s[q][0] = s[q][1] = _mm256_setzero_ps();
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q) {
      const __m256 wi = _mm256_set1_ps(w[i * J + j0 + q]);
      const float* x = v + i * stride + (j0 + q) * H;
      m[q][0] = _mm256_fmadd_ps(wi, _mm256_loadu_ps(x), m[q][0]);
      m[q][1] = _mm256_fmadd_ps(wi, _mm256_loadu_ps(x + 8), m[q][1]);
    }
  for (int i = 0; i < I; ++i)
    for (int q = 0; q < NJ; ++q) {
      const __m256 wi = _mm256_set1_ps(w[i * J + j0 + q]);
      const float* x = v + i * stride + (j0 + q) * H;
      const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(x), m[q][0]);
      const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(x + 8), m[q][1]);
      s[q][0] = _mm256_fmadd_ps(_mm256_mul_ps(wi, d0), d0, s[q][0]);
      s[q][1] = _mm256_fmadd_ps(_mm256_mul_ps(wi, d1), d1, s[q][1]);
    }
  for (int q = 0; q < NJ; ++q) {
    // max(floor, s2) keeps a NaN s2, as std::max(s2, floor) does.
    s[q][0] = _mm256_max_ps(s2_min, s[q][0]);
    s[q][1] = _mm256_max_ps(s2_min, s[q][1]);
    float* mq = mu + (j0 + q) * H;
    float* sq = s2 + (j0 + q) * H;
    _mm256_storeu_ps(mq, m[q][0]);
    _mm256_storeu_ps(mq + 8, m[q][1]);
    _mm256_storeu_ps(sq, s[q][0]);
    _mm256_storeu_ps(sq + 8, s[q][1]);
    lsum[q] = sum_log16(s[q][0], s[q][1]);
  }
}

// Rows i of the E-step's softmax per exp/log batch (bounded stack use).
constexpr int kRowBuf = 512;

}  // namespace

void em_m_step_f32__avx2(float* mu, float* a_out, EmState& st, const float* V,
                         const float* beta_a, const float* beta_v, int B, int I, int J,
                         const EmConfig& cfg) {
  // Formulas as in em_m_step_f32__scalar (see em_routing.h); w's
  // normalisation multiplies by the reciprocal of its sum.
  const __m256 s2_min = _mm256_set1_ps(cfg.sigma2_min);
  const size_t n = size_t(I) * J;
  for (int b = 0; b < B; ++b) {
    float* w = st.w.data() + size_t(b) * n;  // w[i*J + j]
    const float* log_r = st.log_r.data() + size_t(b) * n;
    const float* log_a = st.log_a_in.data() + size_t(b) * I;
    float* S = st.sum_ra.data() + size_t(b) * J;
    if (!st.frozen) m_step_weights(w, S, log_r, log_a, I, J, cfg.eps, exp_n);

    // Two upper capsules at a time: four independent FMA chains hide latency.
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

void em_e_step_f32__avx2(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  // Formulas as in em_e_step_f32__scalar; d^2 / sigma2 multiplies by 1/sigma2.
  const float log_2pi_16 = float(16 * std::log(2.0 * std::numbers::pi));
  alignas(32) float inv_s2[64 * H];
  float norm[64], t[kRowBuf], mx[kRowBuf], lse[kRowBuf];
  const int rows = std::max(1, kRowBuf / J);  // rows i per exp batch
  for (int b = 0; b < B; ++b) {
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const __m256 x0 = _mm256_loadu_ps(st.sigma2.data() + bj * H);
      const __m256 x1 = _mm256_loadu_ps(st.sigma2.data() + bj * H + 8);
      norm[j] = -0.5f * (sum_log16(x0, x1) + log_2pi_16) + st.log_a_out[bj];
      _mm256_store_ps(inv_s2 + j * H, _mm256_div_ps(_mm256_set1_ps(1.f), x0));
      _mm256_store_ps(inv_s2 + j * H + 8, _mm256_div_ps(_mm256_set1_ps(1.f), x1));
    }
    for (int i0 = 0; i0 < I; i0 += rows) {
      const int i1 = std::min(I, i0 + rows);
      for (int i = i0; i < i1; ++i) {
        float* lr = st.log_r.data() + (size_t(b) * I + i) * J;
        const float* v = V + (size_t(b) * I + i) * J * H;
        float m = -INFINITY;
        for (int j = 0; j < J; ++j) {
          const float* u = mu + (size_t(b) * J + j) * H;
          const __m256 d0 = _mm256_sub_ps(_mm256_loadu_ps(v + j * H), _mm256_loadu_ps(u));
          const __m256 d1 = _mm256_sub_ps(_mm256_loadu_ps(v + j * H + 8), _mm256_loadu_ps(u + 8));
          const __m256 q = _mm256_fmadd_ps(_mm256_mul_ps(d0, _mm256_load_ps(inv_s2 + j * H)), d0,
                                           _mm256_mul_ps(_mm256_mul_ps(d1, _mm256_load_ps(inv_s2 + j * H + 8)), d1));
          lr[j] = -0.5f * hsum(q) + norm[j];
          m = std::max(m, lr[j]);
        }
        mx[i - i0] = m;
        for (int j = 0; j < J; ++j) t[(i - i0) * J + j] = lr[j] - m;
      }
      softmax_rows(st.log_r.data() + (size_t(b) * I + i0) * J, t, mx, lse, i1 - i0, J, exp_n, log_n);
    }
  }
}

void em_backward_f32__avx2(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,
                           const float* da_out, const float* V, const float* mu,
                           const float* a_out, const EmState& st, int B, int I, int J,
                           const EmConfig& cfg) {
  // Formulas as in em_backward_f32__scalar.
  const __m256 s2_min = _mm256_set1_ps(cfg.sigma2_min);
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
      const __m256 c = _mm256_set1_ps(dcost * S * 0.5f);
      const __m256 x0 = _mm256_loadu_ps(st.sigma2.data() + bj * H);
      const __m256 x1 = _mm256_loadu_ps(st.sigma2.data() + bj * H + 8);
      const __m256 g0 = _mm256_and_ps(_mm256_cmp_ps(x0, s2_min, _CMP_GT_OQ), _mm256_div_ps(c, x0));
      const __m256 g1 = _mm256_and_ps(_mm256_cmp_ps(x1, s2_min, _CMP_GT_OQ), _mm256_div_ps(c, x1));
      const __m256 t0 = _mm256_add_ps(g0, g0), t1 = _mm256_add_ps(g1, g1);
      const __m256 u0 = _mm256_loadu_ps(mu + bj * H), u1 = _mm256_loadu_ps(mu + bj * H + 8);
      const __m256 e0 = _mm256_loadu_ps(dmu + bj * H), e1 = _mm256_loadu_ps(dmu + bj * H + 8);
      for (int i = 0; i < I; ++i) {
        const __m256 wi = _mm256_set1_ps(st.w[(size_t(b) * I + i) * J + j]);
        const size_t off = ((size_t(b) * I + i) * J + j) * H;
        const __m256 r0 = _mm256_fmadd_ps(t0, _mm256_sub_ps(_mm256_loadu_ps(V + off), u0), e0);
        const __m256 r1 = _mm256_fmadd_ps(t1, _mm256_sub_ps(_mm256_loadu_ps(V + off + 8), u1), e1);
        _mm256_storeu_ps(dV + off, _mm256_fmadd_ps(wi, r0, _mm256_loadu_ps(dV + off)));
        _mm256_storeu_ps(dV + off + 8, _mm256_fmadd_ps(wi, r1, _mm256_loadu_ps(dV + off + 8)));
      }
    }
}

}  // namespace vg
