// The dense layer's small-K weight gradient, alone or fused with Adam, written
// once over a native vector type V of kW floats. Each ISA file
// (elementwise_{avx2,avx512,neon}.cpp) defines in an anonymous namespace
//   V; constexpr int kW (lanes), kRows, kVecs (a tile: kRows rows x kVecs vectors);
//   V vzero(); V vload(const float*); V vload_n(const float*, int n) (lanes >= n: 0);
//   void vstore(float*, V); void vstore_n(float*, V, int n); V vbcast(float);
//   V vfma(V a, V b, V c) = a b + c, fused; V vadd, vsub, vmul, vdiv (V, V); V vsqrt(V)
// then includes this header and defines the entry points with
// VG_WEIGHT_GRAD_DEFINE(isa); each ISA file keeps its own internally linked copy
// (tools/check_isa_objects.sh).
//
// Every element of dW is one FMA chain over b = 0 .. B-1 from 0, whatever the
// tile, and Adam is the reference's operations in its order (adam_vec), so the
// bits are those of weight_grad_f32__scalar and adam_update_f32__scalar.
//
// The fused form: see weight_grad_adam_simd.
#pragma once
#include <algorithm>
#include <cstddef>
#include <type_traits>

#include "kernels/elementwise.h"

namespace vg {
namespace {

static_assert(kRows >= 1 && kRows <= kWeightGradMaxRows && kFusedRows >= 1 && kFusedRows <= kWeightGradMaxRows);

struct AdamV {
  V b1, b2, c1, c2, lr, is, eps;
  explicit AdamV(const AdamScalars& a)
      : b1(vbcast(a.b1)), b2(vbcast(a.b2)), c1(vbcast(1.f - a.b1)), c2(vbcast(1.f - a.b2)),
        lr(vbcast(a.lr_c1)), is(vbcast(a.inv_sqrt_c2)), eps(vbcast(a.eps)) {}
};

// One Adam step on n <= kW parameters: the scalar reference's operations.
inline void adam_vec(float* w, float* m, float* v, const float* g, int n, const AdamV& a) {
  const bool full = n == kW;
  const V gk = full ? vload(g) : vload_n(g, n);
  const V mk = vadd(vmul(a.b1, full ? vload(m) : vload_n(m, n)), vmul(a.c1, gk));
  const V vk = vadd(vmul(a.b2, full ? vload(v) : vload_n(v, n)), vmul(vmul(a.c2, gk), gk));
  const V den = vadd(vmul(vsqrt(vk), a.is), a.eps);
  const V wk = vsub(full ? vload(w) : vload_n(w, n), vdiv(vmul(a.lr, mk), den));
  if (full) {
    vstore(m, mk);
    vstore(v, vk);
    vstore(w, wk);
  } else {
    vstore_n(m, mk, n);
    vstore_n(v, vk, n);
    vstore_n(w, wk, n);
  }
}

// An R x C tile of the gradient at rows k0.., columns n0.. (the last vector
// `tail` lanes wide) into acc.
template <int R, int C>
inline void weight_grad_tile(V (&acc)[R][C], const float* src_t, const float* dd, int B, int N,
                             int k0, int n0, int tail) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < C; ++c) acc[r][c] = vzero();
  const float* s = src_t + size_t(k0) * B;
  for (int b = 0; b < B; ++b) {
    const float* d = dd + size_t(b) * N + n0;
    V x[C];
#pragma GCC unroll 4
    for (int c = 0; c + 1 < C; ++c) x[c] = vload(d + c * kW);
    x[C - 1] = tail == kW ? vload(d + (C - 1) * kW) : vload_n(d + (C - 1) * kW, tail);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const V sb = vbcast(s[size_t(r) * B + b]);
#pragma GCC unroll 4
      for (int c = 0; c < C; ++c) acc[r][c] = vfma(sb, x[c], acc[r][c]);
    }
  }
}

// Calls f(std::integral_constant<int, C>) for C = cw in 1 .. Cmax.
template <int Cmax, class F>
inline void with_vecs(int cw, F&& f) {
  static_assert(Cmax >= 1 && Cmax <= 4);
  switch (cw) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: if constexpr (Cmax >= 2) f(std::integral_constant<int, 2>{}); break;
    case 3: if constexpr (Cmax >= 3) f(std::integral_constant<int, 3>{}); break;
    default: if constexpr (Cmax >= 4) f(std::integral_constant<int, 4>{}); break;
  }
}

// A band of R rows; in it, the columns in groups of at most Cmax vectors,
// sized evenly (9 vectors: 3 + 3 + 3; 4: 2 + 2). out(row, col, value, lanes)
// takes each finished vector; between() runs after each tile.
template <int Cmax>
inline int weight_grad_groups(int N) { return ((N + kW - 1) / kW + Cmax - 1) / Cmax; }
template <int R, int Cmax, class Out, class Between>
inline void weight_grad_band(const float* src_t, const float* dd, int B, int N, int k0, Out& out,
                             Between& between) {
  const int nv = (N + kW - 1) / kW, groups = weight_grad_groups<Cmax>(N);
  int v0 = 0;
  for (int gi = 0; gi < groups; ++gi) {
    const int cw = nv / groups + (gi < nv % groups ? 1 : 0), n0 = v0 * kW;
    v0 += cw;
    const int tail = std::min(kW, N - (v0 - 1) * kW);
    with_vecs<Cmax>(cw, [&](auto cc) {
      constexpr int C = decltype(cc)::value;
      V acc[R][C];
      weight_grad_tile<R, C>(acc, src_t, dd, B, N, k0, n0, tail);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
        for (int c = 0; c < C; ++c) out(r, n0 + c * kW, acc[r][c], c + 1 == C ? tail : kW);
    });
    between();
  }
}

inline void weight_grad_simd(float* dW, const float* src_t, const float* dd, int B, int K, int N) {
  auto none = [] {};
  int k0 = 0;
  auto to_dw = [&](int r, int n, V x, int lanes) {
    float* p = dW + size_t(k0 + r) * N + n;
    if (lanes == kW) vstore(p, x);
    else vstore_n(p, x, lanes);
  };
  for (; k0 + kRows <= K; k0 += kRows) weight_grad_band<kRows, kVecs>(src_t, dd, B, N, k0, to_dw, none);
  for (; k0 < K; ++k0) weight_grad_band<1, kVecs>(src_t, dd, B, N, k0, to_dw, none);
}

// Band i's gradient goes to scratch half i % 2 (rows x N, as in w). While
// band i + 1 runs, Adam applies band i a few vectors after each tile, and the
// w, m, v lines of band i + 1 are prefetched, so that Adam's loads hit L1
// and its divisions overlap the next tile's multiply-adds.
inline void weight_grad_adam_simd(float* w, float* m, float* v, float* scratch, const float* src_t,
                                  const float* dd, int B, int K, int N, const AdamScalars& a) {
  const AdamV av(a);
  const int groups = weight_grad_groups<kFusedVecs>(N);
  constexpr int kLine = 64 / sizeof(float);
  struct Pending {
    const float* g = nullptr;          // the band's gradient
    size_t at = 0, done = 0, len = 0;  // its offset in w, m, v; floats applied; floats in all
    size_t per_tile = 0;               // floats applied after each tile of the next band
  } pend;
  size_t pf_at = 0, pf_end = 0, pf_per_tile = 0;  // the band's w, m, v lines still to prefetch
  auto apply = [&](size_t upto) {
    for (; pend.done < upto; pend.done += kW) {
      const size_t o = pend.at + pend.done;
      adam_vec(w + o, m + o, v + o, pend.g + pend.done, int(std::min<size_t>(kW, pend.len - pend.done)), av);
    }
    pend.done = std::min(pend.done, pend.len);
  };
  auto between = [&] {
    apply(std::min(pend.len, pend.done + pend.per_tile));
    for (const size_t end = std::min(pf_end, pf_at + pf_per_tile); pf_at < end; pf_at += kLine) {
      __builtin_prefetch(w + pf_at, 1);
      __builtin_prefetch(m + pf_at, 1);
      __builtin_prefetch(v + pf_at, 1);
    }
  };
  int k0 = 0, half = 0;
  float* gb = scratch;
  auto to_scratch = [&](int r, int n, V x, int lanes) {
    float* p = gb + size_t(r) * N + n;
    if (lanes == kW) vstore(p, x);
    else vstore_n(p, x, lanes);
  };
  auto start = [&](int rows) {  // band k0's lines, spread over its tiles
    pf_at = size_t(k0) * N;
    pf_end = pf_at + size_t(rows) * N;
    pf_per_tile = (size_t(rows) * N / groups + kLine) / kLine * kLine;
  };
  auto hand_over = [&](int rows) {
    apply(pend.len);
    pend.g = gb;
    pend.at = size_t(k0) * N;
    pend.done = 0;
    pend.len = size_t(rows) * N;
    pend.per_tile = (pend.len / groups + kW) / kW * kW;
    half ^= 1;
    gb = scratch + size_t(half) * kFusedRows * N;
  };
  for (; k0 + kFusedRows <= K; k0 += kFusedRows) {
    start(kFusedRows);
    weight_grad_band<kFusedRows, kFusedVecs>(src_t, dd, B, N, k0, to_scratch, between);
    hand_over(kFusedRows);
  }
  for (; k0 < K; ++k0) {
    start(1);
    weight_grad_band<1, kFusedVecs>(src_t, dd, B, N, k0, to_scratch, between);
    hand_over(1);
  }
  apply(pend.len);
}

}  // namespace
}  // namespace vg

#define VG_WEIGHT_GRAD_DEFINE(isa)                                                                 \
  namespace vg {                                                                                   \
  void weight_grad_f32__##isa(float* dW, const float* src_t, const float* dd, int B, int K,        \
                              int N) {                                                             \
    weight_grad_simd(dW, src_t, dd, B, K, N);                                                      \
  }                                                                                                \
  void weight_grad_adam_f32__##isa(float* w, float* m, float* v, float* scratch,                   \
                                   const float* src_t, const float* dd, int B, int K, int N,       \
                                   const AdamScalars& a) {                                         \
    weight_grad_adam_simd(w, m, v, scratch, src_t, dd, B, K, N, a);                                \
  }                                                                                                \
  }
