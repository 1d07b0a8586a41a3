// AVX2 + FMA pose matmul (built with -mavx2 -mfma). A 4x4 matrix is two ymm
// registers, rows (0,1) and (2,3); every product is whole, so no tail loop.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>

#include "kernels/pose_matmul.h"
#include "kernels/pose_matmul_simd.h"

namespace vg {

namespace {

// [p[0..3] | p[0..3]]: one 4-float row in both 128-bit lanes (a load, no shuffle).
inline __m256 bcast_row(const float* p) {
  return _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
}

// Element k of each lane's row broadcast over the lane: [x[4l+k] x4 | x[4+4l+k] x4].
template <int k>
inline __m256 col(__m256 x) {
  return _mm256_permute_ps(x, k * 0x55);
}

// Pairs (i, j) whose W diagonals fit the stack scratch of backward.
constexpr int kWBlock = 64;

}  // namespace

void pose_matmul_f32__avx2(float* V, const float* M, const float* W, int B, int I, int J) {
  // V[r,:] = sum_k M[r,k] W[k,:]: the columns of M are permuted once per (b,i)
  // and reused for all j; the rows of W are broadcast loads.
  for (size_t bi = 0; bi < size_t(B) * I; ++bi) {
    const float* m = M + bi * 16;
    const __m256 m01 = _mm256_loadu_ps(m), m23 = _mm256_loadu_ps(m + 8);
    const __m256 a0 = col<0>(m01), a1 = col<1>(m01), a2 = col<2>(m01), a3 = col<3>(m01);
    const __m256 c0 = col<0>(m23), c1 = col<1>(m23), c2 = col<2>(m23), c3 = col<3>(m23);
    const float* w = W + size_t(bi % size_t(I)) * J * 16;
    float* v = V + bi * J * 16;
    for (int j = 0; j < J; ++j, w += 16, v += 16) {
      const __m256 w0 = bcast_row(w), w1 = bcast_row(w + 4), w2 = bcast_row(w + 8),
                   w3 = bcast_row(w + 12);
      __m256 v01 = _mm256_mul_ps(a0, w0), v23 = _mm256_mul_ps(c0, w0);
      v01 = _mm256_fmadd_ps(a1, w1, v01);
      v23 = _mm256_fmadd_ps(c1, w1, v23);
      v01 = _mm256_fmadd_ps(a2, w2, v01);
      v23 = _mm256_fmadd_ps(c2, w2, v23);
      v01 = _mm256_fmadd_ps(a3, w3, v01);
      v23 = _mm256_fmadd_ps(c3, w3, v23);
      _mm256_storeu_ps(v, v01);
      _mm256_storeu_ps(v + 8, v23);
    }
  }
}

void pose_matmul_backward_f32__avx2(float* dM, float* dW, const float* dV, const float* M,
                                    const float* W, int B, int I, int J) {
  // dM[r,k] = sum_c dV[r,c] W[k,c] without shuffling dV: with the diagonals
  // D_s[c] = W[(c+s)%4, c], Q_s = sum_j dV (.) D_s (elementwise, rows broadcast)
  // holds dM[r,(c+s)%4]'s terms in lane c, so dM[r,k] = sum_s Q_s[r,(k-s)%4]:
  // four in-lane rotations per (b,i), none per j.
  // dW[k,:] += sum_r M[r,k] dV[r,:]: M's entries are spread once per (b,i)
  // ([M[r,k] x4 | M[r,k+1] x4]) and dV's rows are broadcast loads.
  alignas(32) float diag[kWBlock * 16];  // per (i,j): D_0..D_3, 4 floats each
  const int ib = J <= kWBlock ? kWBlock / J : 1;  // i per block
  const int jb = std::min(J, kWBlock);             // j per block
  const __m256i lo_k = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const __m256i hi_k = _mm256_setr_epi32(2, 2, 2, 2, 3, 3, 3, 3);
  for (int i0 = 0; i0 < I; i0 += ib) {
    const int i1 = std::min(I, i0 + ib);
    for (int j0 = 0; j0 < J; j0 += jb) {
      const int j1 = std::min(J, j0 + jb), nj = j1 - j0;
      pack_w_diagonals(diag, W, i0, i1, j0, j1, J);
      for (int b = 0; b < B; ++b)
        for (int i = i0; i < i1; ++i) {
          const size_t bi = size_t(b) * I + i;
          const float* dv = dV + (bi * J + j0) * 16;
          const float* d = diag + (i - i0) * nj * 16;
          __m256 q0a = _mm256_setzero_ps(), q1a = q0a, q2a = q0a, q3a = q0a;  // rows 0,1
          __m256 q0b = q0a, q1b = q0a, q2b = q0a, q3b = q0a;                  // rows 2,3
          for (int j = 0; j < nj; ++j) {
            const __m256 g01 = _mm256_loadu_ps(dv + j * 16), g23 = _mm256_loadu_ps(dv + j * 16 + 8);
            const __m256 d0 = bcast_row(d + j * 16), d1 = bcast_row(d + j * 16 + 4),
                         d2 = bcast_row(d + j * 16 + 8), d3 = bcast_row(d + j * 16 + 12);
            q0a = _mm256_fmadd_ps(g01, d0, q0a);
            q0b = _mm256_fmadd_ps(g23, d0, q0b);
            q1a = _mm256_fmadd_ps(g01, d1, q1a);
            q1b = _mm256_fmadd_ps(g23, d1, q1b);
            q2a = _mm256_fmadd_ps(g01, d2, q2a);
            q2b = _mm256_fmadd_ps(g23, d2, q2b);
            q3a = _mm256_fmadd_ps(g01, d3, q3a);
            q3b = _mm256_fmadd_ps(g23, d3, q3b);
          }
          // Lane k takes Q_s's lane (k-s)%4: rotations by 0, 1, 2, 3.
          __m256 ra = _mm256_add_ps(q0a, _mm256_permute_ps(q1a, 0x93));
          __m256 rb = _mm256_add_ps(q0b, _mm256_permute_ps(q1b, 0x93));
          ra = _mm256_add_ps(ra, _mm256_add_ps(_mm256_permute_ps(q2a, 0x4E), _mm256_permute_ps(q3a, 0x39)));
          rb = _mm256_add_ps(rb, _mm256_add_ps(_mm256_permute_ps(q2b, 0x4E), _mm256_permute_ps(q3b, 0x39)));
          float* dm = dM + bi * 16;
          _mm256_storeu_ps(dm, _mm256_add_ps(_mm256_loadu_ps(dm), ra));
          _mm256_storeu_ps(dm + 8, _mm256_add_ps(_mm256_loadu_ps(dm + 8), rb));

          const float* m = M + bi * 16;
          const __m256 m0 = bcast_row(m), m1 = bcast_row(m + 4), m2 = bcast_row(m + 8),
                       m3 = bcast_row(m + 12);
          const __m256 p0a = _mm256_permutevar_ps(m0, lo_k), p0b = _mm256_permutevar_ps(m0, hi_k);
          const __m256 p1a = _mm256_permutevar_ps(m1, lo_k), p1b = _mm256_permutevar_ps(m1, hi_k);
          const __m256 p2a = _mm256_permutevar_ps(m2, lo_k), p2b = _mm256_permutevar_ps(m2, hi_k);
          const __m256 p3a = _mm256_permutevar_ps(m3, lo_k), p3b = _mm256_permutevar_ps(m3, hi_k);
          float* dw = dW + (size_t(i) * J + j0) * 16;
          for (int j = 0; j < nj; ++j) {
            const float* g = dv + j * 16;
            const __m256 g0 = bcast_row(g), g1 = bcast_row(g + 4), g2 = bcast_row(g + 8),
                         g3 = bcast_row(g + 12);
            __m256 wa = _mm256_loadu_ps(dw + j * 16), wb = _mm256_loadu_ps(dw + j * 16 + 8);
            wa = _mm256_fmadd_ps(p0a, g0, wa);
            wb = _mm256_fmadd_ps(p0b, g0, wb);
            wa = _mm256_fmadd_ps(p1a, g1, wa);
            wb = _mm256_fmadd_ps(p1b, g1, wb);
            wa = _mm256_fmadd_ps(p2a, g2, wa);
            wb = _mm256_fmadd_ps(p2b, g2, wb);
            wa = _mm256_fmadd_ps(p3a, g3, wa);
            wb = _mm256_fmadd_ps(p3b, g3, wb);
            _mm256_storeu_ps(dw + j * 16, wa);
            _mm256_storeu_ps(dw + j * 16 + 8, wb);
          }
        }
    }
  }
}

}  // namespace vg
