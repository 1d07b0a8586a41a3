// AVX-512 pose matmul (built with -mavx512f -mavx512vl -mavx512dq -mfma). A 4x4
// matrix is one zmm register, row r in 128-bit lane r; every product is whole,
// so no tail loop.
#include "kernels/vec_avx512.h"

#include <algorithm>
#include <cstddef>

#include "kernels/pose_matmul.h"
#include "kernels/pose_matmul_simd.h"

namespace vg {

namespace {

// Pairs (i, j) whose W diagonals fit the stack scratch of backward.
constexpr int kWBlock = 64;

}  // namespace

void pose_matmul_f32__avx512(float* V, const float* M, const float* W, int B, int I, int J) {
  // V[r,:] = sum_k M[r,k] W[k,:]: lane r of a_k is M[r,k] x4 (in-lane permute,
  // once per (b,i)); W's rows are broadcast loads.
  for (size_t bi = 0; bi < size_t(B) * I; ++bi) {
    const __m512 m = _mm512_loadu_ps(M + bi * 16);
    const __m512 a0 = _mm512_permute_ps(m, 0x00), a1 = _mm512_permute_ps(m, 0x55),
                 a2 = _mm512_permute_ps(m, 0xAA), a3 = _mm512_permute_ps(m, 0xFF);
    const float* w = W + size_t(bi % size_t(I)) * J * 16;
    float* v = V + bi * J * 16;
    for (int j = 0; j < J; ++j, w += 16, v += 16) {
      __m512 acc = _mm512_mul_ps(a0, bcast_row(w));
      acc = _mm512_fmadd_ps(a1, bcast_row(w + 4), acc);
      acc = _mm512_fmadd_ps(a2, bcast_row(w + 8), acc);
      acc = _mm512_fmadd_ps(a3, bcast_row(w + 12), acc);
      _mm512_storeu_ps(v, acc);
    }
  }
}

void pose_matmul_backward_f32__avx512(float* dM, float* dW, const float* dV, const float* M,
                                      const float* W, int B, int I, int J) {
  // As the AVX2 variant: dM through W's diagonals D_s[c] = W[(c+s)%4, c]
  // (Q_s = sum_j dV (.) D_s, then dM[r,k] = sum_s Q_s[r,(k-s)%4]); dW row k
  // (lane k) += sum_r [M[r,k] x4] (.) dV[r,:], M's entries spread once per (b,i).
  alignas(64) float diag[kWBlock * 16];  // per (i,j): D_0..D_3, 4 floats each
  const int ib = J <= kWBlock ? kWBlock / J : 1;
  const int jb = std::min(J, kWBlock);
  // spread_r: lane k = M[r,k] x4, i.e. element 4k+c takes M[4r+k].
  const __m512i sp0 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  const __m512i sp1 = _mm512_add_epi32(sp0, _mm512_set1_epi32(4));
  const __m512i sp2 = _mm512_add_epi32(sp0, _mm512_set1_epi32(8));
  const __m512i sp3 = _mm512_add_epi32(sp0, _mm512_set1_epi32(12));
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
          __m512 q0 = _mm512_setzero_ps(), q1 = q0, q2 = q0, q3 = q0;
          for (int j = 0; j < nj; ++j) {
            const __m512 g = _mm512_loadu_ps(dv + j * 16);
            q0 = _mm512_fmadd_ps(g, bcast_row(d + j * 16), q0);
            q1 = _mm512_fmadd_ps(g, bcast_row(d + j * 16 + 4), q1);
            q2 = _mm512_fmadd_ps(g, bcast_row(d + j * 16 + 8), q2);
            q3 = _mm512_fmadd_ps(g, bcast_row(d + j * 16 + 12), q3);
          }
          // Lane k takes Q_s's lane (k-s)%4: rotations by 0, 1, 2, 3.
          const __m512 r = _mm512_add_ps(_mm512_add_ps(q0, _mm512_permute_ps(q1, 0x93)),
                                         _mm512_add_ps(_mm512_permute_ps(q2, 0x4E), _mm512_permute_ps(q3, 0x39)));
          float* dm = dM + bi * 16;
          _mm512_storeu_ps(dm, _mm512_add_ps(_mm512_loadu_ps(dm), r));

          const __m512 m = _mm512_loadu_ps(M + bi * 16);
          const __m512 p0 = _mm512_permutexvar_ps(sp0, m), p1 = _mm512_permutexvar_ps(sp1, m),
                       p2 = _mm512_permutexvar_ps(sp2, m), p3 = _mm512_permutexvar_ps(sp3, m);
          float* dw = dW + (size_t(i) * J + j0) * 16;
          for (int j = 0; j < nj; ++j) {
            const float* g = dv + j * 16;
            __m512 acc = _mm512_loadu_ps(dw + j * 16);
            acc = _mm512_fmadd_ps(p0, bcast_row(g), acc);
            acc = _mm512_fmadd_ps(p1, bcast_row(g + 4), acc);
            acc = _mm512_fmadd_ps(p2, bcast_row(g + 8), acc);
            acc = _mm512_fmadd_ps(p3, bcast_row(g + 12), acc);
            _mm512_storeu_ps(dw + j * 16, acc);
          }
        }
    }
  }
}

}  // namespace vg
