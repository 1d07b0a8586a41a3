// AVX-512 elementwise kernels (built with -mavx512f -mavx512vl -mavx512dq -mfma):
// the scalar reference's operations in its order, 16 lanes at a time, the tail
// under a mask (no FMA: see elementwise.h).
#include "kernels/avx512_intrinsics.h"

#include "kernels/elementwise.h"

namespace vg {

void adam_update_f32__avx512(float* w, float* m, float* v, const float* g, size_t n, float b1,
                             float b2, float lr_c1, float inv_sqrt_c2, float eps) {
  const __m512 vb1 = _mm512_set1_ps(b1), vb2 = _mm512_set1_ps(b2), vc1 = _mm512_set1_ps(1.f - b1),
               vc2 = _mm512_set1_ps(1.f - b2), vlr = _mm512_set1_ps(lr_c1),
               vis = _mm512_set1_ps(inv_sqrt_c2), veps = _mm512_set1_ps(eps);
  for (size_t k = 0; k < n; k += 16) {
    const __mmask16 live = n - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - k)) - 1);
    const __m512 gk = _mm512_maskz_loadu_ps(live, g + k);
    const __m512 mk = _mm512_add_ps(_mm512_mul_ps(vb1, _mm512_maskz_loadu_ps(live, m + k)), _mm512_mul_ps(vc1, gk));
    const __m512 vk = _mm512_add_ps(_mm512_mul_ps(vb2, _mm512_maskz_loadu_ps(live, v + k)),
                                    _mm512_mul_ps(_mm512_mul_ps(vc2, gk), gk));
    const __m512 den = _mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vk), vis), veps);
    const __m512 wk = _mm512_sub_ps(_mm512_maskz_loadu_ps(live, w + k), _mm512_div_ps(_mm512_mul_ps(vlr, mk), den));
    _mm512_mask_storeu_ps(m + k, live, mk);
    _mm512_mask_storeu_ps(v + k, live, vk);
    _mm512_mask_storeu_ps(w + k, live, wk);
  }
}

void relu_backward_f32__avx512(float* d, const float* y, size_t n) {
  for (size_t k = 0; k < n; k += 16) {
    const __mmask16 live = n - k >= 16 ? __mmask16(0xffff) : __mmask16((1u << (n - k)) - 1);
    const __mmask16 keep = _mm512_mask_cmp_ps_mask(live, _mm512_maskz_loadu_ps(live, y + k),
                                                   _mm512_setzero_ps(), _CMP_GT_OQ);
    _mm512_mask_storeu_ps(d + k, live, _mm512_maskz_loadu_ps(keep, d + k));
  }
}

}  // namespace vg
