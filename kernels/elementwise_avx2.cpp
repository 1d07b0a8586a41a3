// AVX2 elementwise kernels (built with -mavx2 -mfma): the scalar reference's
// operations in its order, 8 lanes at a time (no FMA: see elementwise.h).
#include <immintrin.h>

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

}  // namespace vg
