// The convolutional-vote kernels written once over a 4x4 matrix type F16 (one
// zmm, two ymm or four q registers; row r in 128-bit group r). Each ISA file
// (conv_votes_{avx2,avx512,neon}.cpp) defines, in an anonymous namespace,
//   F16 zero16(); F16 load16(const float*); void store16(float*, F16);
//   F16 add16(F16, F16); F16 mul16(F16, F16); F16 fma16(a, b, acc) = acc + a b (fused);
//   F16 bcast_row(const float* p)   every group = p[0..3]
//   F16 col<k>(F16 m)               group r = m[r][k] x4
//   F16 spread_row(const float* p)  group k = p[k] x4
//   F16 rot<s>(F16 x)               group r, lane c = x[r][(c - s) % 4]
// then includes this header, which instantiates the kernels in that same
// anonymous namespace: every ISA file keeps its own internally linked copy
// built with its flags (tools/check_isa_objects.sh). A vote is a whole
// matrix, so there are no leftovers.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/conv_votes.h"

namespace vg {
namespace {

// (weight row, parent type) pairs whose W diagonals backward packs at once, on
// the stack (64 KB): the paper's ConvCaps layers take 2 or 3 blocks, so each
// block reads dV in runs of tens of KB (small blocks read it in short runs, at half
// the speed at batch 32).
constexpr int kCvBlock = 1024;
// How far ahead (in floats: 4 KB) backward prefetches dV.
constexpr int kCvAhead = 1024;

// Software prefetch of n 64-byte lines from `ahead` floats past p: the hardware
// prefetchers alone left the backward at a quarter of DRAM bandwidth at batch 32.
// The offset is added as an integer, since p + ahead may lie past the end of the
// array (a pointer there is undefined; a prefetch of that address is harmless).
inline void prefetch_lines(const float* p, size_t ahead, int n) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + ahead * sizeof(float);
  for (int l = 0; l < n; ++l) __builtin_prefetch(reinterpret_cast<const void*>(a + size_t(l) * 64));
}

// Offset of the child poses at input position (y, x) of image b (M's and dM's layout).
inline size_t child_offset(const ConvVotesShape& s, int b, int y, int x) {
  return ((size_t(b) * s.H + y) * s.W + x) * s.Ci * 16;
}

template <bool kCoords>
inline void forward_rows(float* v, const float* m, const float* w, int Co, F16 cvec) {
  // V[r,:] = sum_k M[r,k] W[k,:]: M's columns spread once, reused for every o.
  const F16 mm = load16(m);
  const F16 a0 = col<0>(mm), a1 = col<1>(mm), a2 = col<2>(mm), a3 = col<3>(mm);
  for (int o = 0; o < Co; ++o, w += 16, v += 16) {
    F16 acc = mul16(a0, bcast_row(w));
    acc = fma16(a1, bcast_row(w + 4), acc);
    acc = fma16(a2, bcast_row(w + 8), acc);
    acc = fma16(a3, bcast_row(w + 12), acc);
    if constexpr (kCoords) acc = add16(acc, cvec);
    store16(v, acc);
  }
}

template <bool kCoords>
inline void forward_simd(float* V, const float* M, const float* W, const VoteCoords* coords, const ConvVotesShape& s) {
  const int Ho = s.Ho(), Wo = s.Wo(), kh = s.kh(), kw = s.kw(), st = s.step(), Ci = s.Ci, Co = s.Co;
  alignas(64) float cbuf[16] = {};  // the coordinates as a 4x4 (two nonzero elements)
  F16 cvec = zero16();
  float* v = V;  // the votes are written in order
  for (int b = 0; b < s.B; ++b)
    for (int oy = 0; oy < Ho; ++oy)
      for (int ox = 0; ox < Wo; ++ox)
        for (int ky = 0; ky < kh; ++ky)
          for (int kx = 0; kx < kw; ++kx) {
            const int y = oy * st + ky, x = ox * st + kx;
            if constexpr (kCoords) {
              cbuf[coords->row_elem()] = coords->row[y];
              cbuf[coords->col_elem()] = coords->col[x];
              cvec = load16(cbuf);
            }
            const float* m = M + child_offset(s, b, y, x);
            const float* w = W + size_t(s.shared() ? 0 : ky * s.K + kx) * Ci * Co * 16;
            for (int i = 0; i < Ci; ++i, m += 16, w += size_t(Co) * 16, v += size_t(Co) * 16)
              forward_rows<kCoords>(v, m, w, Co, cvec);
          }
}

// diag[((r - r0) no + (o - o0)) 16 + 4 s + c] = W[r][o][(c + s) % 4][c] for
// weight rows [r0, r1) and parent types [o0, o0 + no): dM = dV W^T without
// shuffling dV per o.
inline void pack_diagonals(float* diag, const float* W, int r0, int r1, int o0, int no, int Co) {
  for (int r = r0; r < r1; ++r)
    for (int o = o0; o < o0 + no; ++o) {
      const float* w = W + (size_t(r) * Co + o) * 16;
      float* d = diag + ((r - r0) * no + (o - o0)) * 16;
      for (int sft = 0; sft < 4; ++sft)
        for (int c = 0; c < 4; ++c) d[sft * 4 + c] = w[((c + sft) & 3) * 4 + c];
    }
}

// One child's use in one window, parent types [o0, o0 + no): dm += dv W^T,
// dw += m^T dv. With D_s[c] = W[(c+s)%4, c], Q_s = sum_o dV (.) D_s holds
// dM[r,(c+s)%4]'s terms in lane c, so dM[r,k] = sum_s Q_s[r,(k-s)%4]: four
// in-group rotations per child, none per o.
inline void backward_child(float* dm, float* dw, const float* dv, const float* m, const float* d, int no) {
  F16 q0 = zero16(), q1 = q0, q2 = q0, q3 = q0;
  for (int o = 0; o < no; ++o) {
    const F16 g = load16(dv + o * 16);
    q0 = fma16(g, bcast_row(d + o * 16), q0);
    q1 = fma16(g, bcast_row(d + o * 16 + 4), q1);
    q2 = fma16(g, bcast_row(d + o * 16 + 8), q2);
    q3 = fma16(g, bcast_row(d + o * 16 + 12), q3);
  }
  const F16 r = add16(add16(q0, rot<1>(q1)), add16(rot<2>(q2), rot<3>(q3)));
  store16(dm, add16(load16(dm), r));
  // dW[k,:] += sum_r M[r,k] dV[r,:]: M's entries spread once per child.
  const F16 p0 = spread_row(m), p1 = spread_row(m + 4), p2 = spread_row(m + 8), p3 = spread_row(m + 12);
  for (int o = 0; o < no; ++o) {
    const float* g = dv + o * 16;
    F16 acc = load16(dw + o * 16);
    acc = fma16(p0, bcast_row(g), acc);
    acc = fma16(p1, bcast_row(g + 4), acc);
    acc = fma16(p2, bcast_row(g + 8), acc);
    acc = fma16(p3, bcast_row(g + 12), acc);
    store16(dw + o * 16, acc);
  }
}

inline void backward_simd(float* dM, float* dW, const float* dV, const float* M, const float* W,
                          const ConvVotesShape& s) {
  const int Ho = s.Ho(), Wo = s.Wo(), kh = s.kh(), kw = s.kw(), st = s.step(), I = s.I(), Ci = s.Ci, Co = s.Co;
  const int R = s.weight_rows();
  alignas(64) float diag[kCvBlock * 16];
  // Blocks of weight rows x parent types, each packed once and used by every
  // window; a row is (kernel position, child type), kernel position 0 when shared.
  const int ob = std::min(Co, kCvBlock);
  const int rb = std::max(1, kCvBlock / ob);
  for (int r0 = 0; r0 < R; r0 += rb) {
    const int r1 = std::min(R, r0 + rb);
    for (int o0 = 0; o0 < Co; o0 += ob) {
      const int no = std::min(ob, Co - o0);
      pack_diagonals(diag, W, r0, r1, o0, no, Co);
      for (int b = 0; b < s.B; ++b)
        for (int oy = 0; oy < Ho; ++oy)
          for (int ox = 0; ox < Wo; ++ox) {
            const float* dv_win = dV + (((size_t(b) * Ho + oy) * Wo + ox) * I) * Co * 16;
            for (int r = r0; r < r1; ++r) {
              const int kpos = r / Ci, i = r % Ci;
              const float* d = diag + (r - r0) * no * 16;
              float* dw = dW + (size_t(r) * Co + o0) * 16;
              // The window's children that use row r: one kernel position, or all when shared.
              const int p0 = s.shared() ? 0 : kpos, p1 = s.shared() ? kh * kw : kpos + 1;
              for (int p = p0; p < p1; ++p) {
                const int ky = p / kw, kx = p % kw;
                const size_t child = child_offset(s, b, oy * st + ky, ox * st + kx) + i * 16;
                const float* dv = dv_win + (size_t(p * Ci + i) * Co + o0) * 16;
                prefetch_lines(dv, kCvAhead, no);
                backward_child(dM + child, dw, dv, M + child, d, no);
              }
            }
          }
    }
  }
}

}  // namespace
}  // namespace vg

// The exported kernels of one ISA: VG_CV_DEFINE(avx2) in conv_votes_avx2.cpp.
#define VG_CV_DEFINE(isa)                                                                                  \
  namespace vg {                                                                                           \
  void conv_votes_forward_f32__##isa(float* V, const float* M, const float* W, const VoteCoords* coords,    \
                                     const ConvVotesShape& s) {                                            \
    if (coords) forward_simd<true>(V, M, W, coords, s);                                                    \
    else forward_simd<false>(V, M, W, coords, s);                                                          \
  }                                                                                                        \
  void conv_votes_backward_f32__##isa(float* dM, float* dW, const float* dV, const float* M, const float* W, \
                                      const ConvVotesShape& s) {                                           \
    backward_simd(dM, dW, dV, M, W, s);                                                                    \
  }                                                                                                        \
  }
