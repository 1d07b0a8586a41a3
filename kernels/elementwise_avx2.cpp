// AVX2 elementwise kernels (built with -mavx2 -mfma): the scalar reference's
// operations in its order, 8 lanes at a time (no FMA: see elementwise.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>

#include "core/rng.h"
#include "kernels/elementwise.h"

namespace vg {

void adam_update_f32__avx2(float* w, float* m, float* v, const float* g, size_t n, float b1,
                           float b2, float lr_c1, float inv_sqrt_c2, float eps) {
  const float c1 = 1.f - b1, c2 = 1.f - b2;
  const __m256 vb1 = _mm256_set1_ps(b1), vb2 = _mm256_set1_ps(b2), vc1 = _mm256_set1_ps(c1),
               vc2 = _mm256_set1_ps(c2), vlr = _mm256_set1_ps(lr_c1),
               vis = _mm256_set1_ps(inv_sqrt_c2), veps = _mm256_set1_ps(eps);
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 gk = _mm256_loadu_ps(g + k);
    const __m256 mk = _mm256_add_ps(_mm256_mul_ps(vb1, _mm256_loadu_ps(m + k)), _mm256_mul_ps(vc1, gk));
    const __m256 vk = _mm256_add_ps(_mm256_mul_ps(vb2, _mm256_loadu_ps(v + k)),
                                    _mm256_mul_ps(_mm256_mul_ps(vc2, gk), gk));
    const __m256 den = _mm256_add_ps(_mm256_mul_ps(_mm256_sqrt_ps(vk), vis), veps);
    _mm256_storeu_ps(m + k, mk);
    _mm256_storeu_ps(v + k, vk);
    _mm256_storeu_ps(w + k, _mm256_sub_ps(_mm256_loadu_ps(w + k), _mm256_div_ps(_mm256_mul_ps(vlr, mk), den)));
  }
  for (; k < n; ++k) {  // the tail: the scalar reference's expressions
    m[k] = b1 * m[k] + c1 * g[k];
    v[k] = b2 * v[k] + c2 * g[k] * g[k];
    w[k] -= lr_c1 * m[k] / (std::sqrt(v[k]) * inv_sqrt_c2 + eps);
  }
}

void relu_backward_f32__avx2(float* d, const float* y, size_t n) {
  const __m256 zero = _mm256_setzero_ps();
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    const __m256 keep = _mm256_cmp_ps(_mm256_loadu_ps(y + k), zero, _CMP_GT_OQ);
    _mm256_storeu_ps(d + k, _mm256_and_ps(keep, _mm256_loadu_ps(d + k)));
  }
  for (; k < n; ++k) d[k] = y[k] > 0.f ? d[k] : 0.f;
}

namespace {
// The 8 x 8 tile at (r, c) through registers: unpack, shuffle, swap 128-bit halves.
inline void transpose_tile(float* dst, const float* src, int rows, int cols, int r, int c) {
  __m256 a[8], t[8];
  for (int i = 0; i < 8; ++i) a[i] = _mm256_loadu_ps(src + size_t(r + i) * cols + c);
  for (int i = 0; i < 8; i += 2) {  // per 128-bit half: rows i, i+1 interleaved
    t[i] = _mm256_unpacklo_ps(a[i], a[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(a[i], a[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {  // columns (j, j+4) of rows i..i+3
    a[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    a[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    a[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    a[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {  // column j: low halves of rows 0-3 and 4-7; column j+4: high halves
    _mm256_storeu_ps(dst + size_t(c + j) * rows + r, _mm256_permute2f128_ps(a[j], a[j + 4], 0x20));
    _mm256_storeu_ps(dst + size_t(c + j + 4) * rows + r, _mm256_permute2f128_ps(a[j], a[j + 4], 0x31));
  }
}
}  // namespace

// Strips of 16 columns (a cache line of each source row, used whole before the
// row is left: the rows of a 4096-wide layer are 16 KB apart, all in one L1
// set) of 8 x 8 tiles; the strip's destination (16 x rows) stays in L1. The
// edges (rows or cols not a multiple of 8) by the scalar loop.
void transpose_f32__avx2(float* dst, const float* src, int rows, int cols) {
  const int R = rows / 8 * 8, C = cols / 8 * 8;
  for (int c = 0; c < C; c += 16) {
    const int w = std::min(16, C - c);  // 16, or 8 at the last strip
    for (int r = 0; r < R; r += 8)
      for (int j = 0; j < w; j += 8) transpose_tile(dst, src, rows, cols, r, c + j);
    transpose_rect(dst, src, rows, cols, R, rows, c, c + w);
  }
  transpose_rect(dst, src, rows, cols, 0, rows, C, cols);
}

namespace {
// The high and low words of each 32-bit lane times m (m broadcast), from the
// 64-bit products of the even lanes and of the odd ones.
inline void mul_hi_lo(__m256i a, __m256i m, __m256i* hi, __m256i* lo) {
  const __m256i even = _mm256_mul_epu32(a, m), odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  *hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
  *lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
}

inline __m256 mul(__m256 a, __m256 b) { return _mm256_mul_ps(a, b); }
inline __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
inline __m256 horner(__m256 x2, std::initializer_list<float> c) {  // c[0] x2^n + ... + c[n]
  const float* k = c.begin();
  __m256 p = _mm256_set1_ps(*k++);
  for (; k != c.end(); ++k) p = add(mul(p, x2), _mm256_set1_ps(*k));
  return p;
}

// normal_pair (elementwise.h) on 8 lanes, in its order of operations.
inline void normal_pairs(__m256i w1, __m256i w2, __m256 vstd, __m256* c_out, __m256* s_out) {
  using K = NormalPairConsts;
  const __m256 one = _mm256_set1_ps(1.f);
  const __m256i one_i = _mm256_set1_epi32(1), two_i = _mm256_set1_epi32(2);
  const __m256 u1 = mul(add(_mm256_cvtepi32_ps(_mm256_srli_epi32(w1, 9)), _mm256_set1_ps(0.5f)),
                        _mm256_set1_ps(0x1.0p-23f));
  const __m256i bits = _mm256_castps_si256(u1);
  __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(127));
  __m256 f = _mm256_castsi256_ps(
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFF)), _mm256_set1_epi32(0x3F800000)));
  const __m256 big = _mm256_cmp_ps(f, _mm256_set1_ps(K::kSqrt2), _CMP_GT_OQ);
  f = _mm256_blendv_ps(f, mul(f, _mm256_set1_ps(0.5f)), big);
  e = _mm256_sub_epi32(e, _mm256_castps_si256(big));  // the mask is -1: e + 1
  const __m256 t = _mm256_div_ps(_mm256_sub_ps(f, one), add(f, one)), t2 = mul(t, t);
  const __m256 p = horner(t2, {K::kA9, K::kA7, K::kA5, K::kA3, 1.f});
  const __m256 ln_u1 = add(mul(_mm256_cvtepi32_ps(e), _mm256_set1_ps(K::kLn2)), mul(add(t, t), p));
  const __m256 r = mul(vstd, _mm256_sqrt_ps(mul(_mm256_set1_ps(-2.f), ln_u1)));

  const __m256i j = _mm256_srli_epi32(w2, 8);
  const __m256i q = _mm256_srli_epi32(_mm256_add_epi32(j, _mm256_set1_epi32(1 << 21)), 22);
  const __m256 x = mul(_mm256_cvtepi32_ps(_mm256_sub_epi32(j, _mm256_slli_epi32(q, 22))), _mm256_set1_ps(0x1.0p-24f));
  const __m256 x2 = mul(x, x);
  const __m256 sn = mul(horner(x2, {K::kS9, K::kS7, K::kS5, K::kS3, K::kS1}), x);
  const __m256 cs = add(mul(horner(x2, {K::kC10, K::kC8, K::kC6, K::kC4, K::kC2}), x2), one);
  const __m256 odd = _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(q, one_i), one_i));
  const __m256 c_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(_mm256_add_epi32(q, one_i), two_i), 30));
  const __m256 s_sign = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_and_si256(q, two_i), 30));
  *c_out = mul(r, _mm256_xor_ps(_mm256_blendv_ps(cs, sn, odd), c_sign));
  *s_out = mul(r, _mm256_xor_ps(_mm256_blendv_ps(sn, cs, odd), s_sign));
}
}  // namespace

// Eight Philox blocks at a time, one per lane (the counter in x0, x1; the
// stream in x2, x3), then their two Box-Muller pairs, stored block by block.
void normal_f32__avx2(float* out, size_t n, float std, uint64_t key, uint64_t sub, uint64_t ctr0) {
  using P = Philox4x32;
  const __m256i m0 = _mm256_set1_epi32(int(P::kM0)), m1 = _mm256_set1_epi32(int(P::kM1));
  uint32_t k0[P::kRounds], k1[P::kRounds];
  P::round_keys(key, k0, k1);
  const __m256 vstd = _mm256_set1_ps(std);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (size_t k = 0; k < n; k += 32) {
    const uint64_t first = ctr0 + k / 4;  // lane l: block first + l
    __m256i x0, x1;
    if (uint32_t(first) <= 0xFFFFFFFFu - 7) {  // no carry into the high word among the 8
      x0 = _mm256_add_epi32(_mm256_set1_epi32(int(uint32_t(first))), lane);
      x1 = _mm256_set1_epi32(int(uint32_t(first >> 32)));
    } else {
      alignas(32) uint32_t lo[8], hi[8];
      for (int l = 0; l < 8; ++l) {
        lo[l] = uint32_t(first + uint64_t(l));
        hi[l] = uint32_t((first + uint64_t(l)) >> 32);
      }
      x0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
      x1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
    }
    __m256i x2 = _mm256_set1_epi32(int(uint32_t(sub))), x3 = _mm256_set1_epi32(int(uint32_t(sub >> 32)));
    for (int r = 0; r < P::kRounds; ++r) {  // Philox4x32::round, lane by lane
      __m256i h0, l0, h2, l2;
      mul_hi_lo(x0, m0, &h0, &l0);
      mul_hi_lo(x2, m1, &h2, &l2);
      x0 = _mm256_xor_si256(_mm256_xor_si256(h2, x1), _mm256_set1_epi32(int(k0[r])));
      x1 = l2;
      x2 = _mm256_xor_si256(_mm256_xor_si256(h0, x3), _mm256_set1_epi32(int(k1[r])));
      x3 = l0;
    }
    __m256 a, b, c, d;  // per block: a, b from words 0, 1; c, d from words 2, 3
    normal_pairs(x0, x1, vstd, &a, &b);
    normal_pairs(x2, x3, vstd, &c, &d);
    // Interleave: block l's values a_l b_l c_l d_l are out[4l .. 4l+3].
    const __m256 t0 = _mm256_unpacklo_ps(a, b), t1 = _mm256_unpackhi_ps(a, b);
    const __m256 t2 = _mm256_unpacklo_ps(c, d), t3 = _mm256_unpackhi_ps(c, d);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    alignas(32) float block[32];
    float* dst = n - k >= 32 ? out + k : block;
    _mm256_storeu_ps(dst, _mm256_permute2f128_ps(u0, u1, 0x20));
    _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(u2, u3, 0x20));
    _mm256_storeu_ps(dst + 16, _mm256_permute2f128_ps(u0, u1, 0x31));
    _mm256_storeu_ps(dst + 24, _mm256_permute2f128_ps(u2, u3, 0x31));
    if (dst == block) std::copy(block, block + (n - k), out + k);
  }
}

}  // namespace vg
