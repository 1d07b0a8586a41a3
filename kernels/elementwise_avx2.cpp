// AVX2 elementwise kernels (built with -mavx2 -mfma): the scalar reference's
// operations in its order, 8 lanes at a time (no FMA: see elementwise.h).
#include <immintrin.h>

#include <algorithm>
#include <cmath>

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

}  // namespace vg
