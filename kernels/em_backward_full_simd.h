// The full backward of EM routing (EmGrad::full), written once over the F16
// primitives of the ISA headers em_routing_{avx2,avx512,neon}.h. An ISA file
// includes its header, em_routing_simd.h, then this one; the code lands in
// that file's anonymous namespace, built with its flags. The per-item pieces
// below serve the dense kernel (VG_EM_FULL_DEFINE, an item per batch entry)
// and the convolutional one (conv_em_routing_simd.h, an item per window).
//
// The formulas are the scalar reference's (em_routing_scalar.cpp, above
// em_m_step_backward_full); only the schedule differs. Each M-step's and
// E-step's backward is a few passes over the item's votes, a pose (16
// floats) per register operation, in memory order: blocks of kFullRows rows
// (lower capsules i), and within a block each upper capsule j's poses of
// those rows, its sums over i carried in registers across the block and in
// per-capsule arrays (FullCaps) between blocks. (The reference's order, j
// outer and i inner, strides J x 64 bytes, a power of two at J = 16 or 32,
// through a handful of L1 sets.) E-step t-1's pass also forms M-step t-1's
// sum_i w (V - mu), whose V - mu is its own.
// Each float operation is the reference's, on the same operands in the same
// order: no FMAs, each sum over i in i order, the sum over h of g through
// pair_sum16 (the reference's pairwise order), the sequential sums and every
// expm1 as scalar code, each exp exp_portable's (em_routing.h), whose vector
// form gives its bits. The results are the reference's bit for bit on every
// ISA, which tests/test_em_routing.cpp and
// tests/test_conv_em_routing_backward.cpp assert, so the AVX2 and AVX-512
// paths agree too. FMAs measured about a fifth faster at the ConvCaps shapes
// (AVX2, with a vector exp): not worth giving up those bits (the measurement:
// docs/notes/performance-log.md, "convcaps at the paper's recipe: the SIMD full backward").
#pragma once
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/em_routing.h"

namespace vg {
namespace {

// Rows per block of a pass: a capsule's sums are loaded and stored once per block.
constexpr int kFullRows = 4;

// f(i0, j, n) for each block of n rows from i0 (R, the last fewer) and each
// capsule j, in that order, then done(i0, i0 + n) for the block; n is a
// constant for whole blocks, so that their rows unroll with no test of the
// count.
template <int R = kFullRows, class F, class Done = void (*)(int, int)>
inline void for_row_blocks(int I, int J, F f, Done done = [](int, int) {}) {
  for (int i0 = 0; i0 < I; i0 += R) {
    const int n = std::min(R, I - i0);
    for (int j = 0; j < J; ++j) {
      if (n == R) f(i0, j, std::integral_constant<int, R>{});
      else f(i0, j, n);
    }
    done(i0, i0 + n);
  }
}

// Per upper capsule j (J <= 64) of one item's M-step backward: the E-step's
// adjoints of mu, sigma2 (J x 16) and log a, the centred sum sum_i w (V - mu),
// 1 / sigma2 (the E-step's), dm' and ds (the M-step's adjoints of the weighted
// mean and of the variance before the floor), and the scalars of dl's formula.
struct FullCaps {
  alignas(64) float dmu[64 * H], dsig[64 * H], cen[64 * H], inv[64 * H], dm[64 * H], ds[64 * H];
  float dloga[64], g_mean[64], D[64], leak[64], dS[64];
};

// E-step t-1's log-softmax backward for child i's row (em_e_pair_backward's
// first line): dp_ij = dl_ij - R^t_ij s_j, with s_j the adjoint's sum over the
// parents child i feeds (sum[j ds]: one sum, ds = 0, or one per type, ds = 1)
// and R = exp_portable(log R), as there; and dloga_j += dp_ij, the adjoint of
// M-step t-1's log a_j, summed over i in order.
inline void full_dp_row(float* dp, float* dloga, const float* dl, const float* log_r, const float* sum, int ds,
                        int J) {
  const Vec one_sum = bcastv(sum[0]);
  for_runs(
      size_t(J),
      [&](size_t k, auto l) {
        const Vec d = subv(l.load(dl + k), mulv(exp_portablev(l.load(log_r + k)), ds ? l.load(sum + k) : one_sum));
        l.store(dp + k, d);
        l.store(dloga + k, addv(l.load(dloga + k), d));
      },
      [&](size_t k) {
        const float d = dl[k] - exp_portable(log_r[k]) * sum[k * ds];
        dp[k] = d;
        dloga[k] += d;
      });
}

// The rest of E-step t-1's backward of one item (em_e_pair_backward's loop
// over h, for every pair): from dp (full_dp_row's rows) to c.dmu and c.dsig,
// with dV -= dp (V - mu) / sigma2 on the way, and c.cen for M-step t-1.
// v, dv: the item's votes and their gradient (I x J x 16); s: M-step t-1's state.
inline void full_e_pass(float* dv, FullCaps& c, const float* dp, const float* v, const EmMStepState& s, int I,
                        int J) {
  const size_t stride = size_t(J) * H;  // from row i to i+1
  for (int j = 0; j < J; ++j) store16(c.inv + j * H, div16(bcast16(1.f), load16(s.sigma2 + j * H)));
  std::fill_n(c.dmu, J * H, 0.f);
  std::fill_n(c.dsig, J * H, 0.f);
  std::fill_n(c.cen, J * H, 0.f);
  const F16 one = bcast16(1.f), half = bcast16(0.5f);
  auto rows = [&](int i0, int j, auto n) {  // n: a constant for whole blocks
    const F16 mu = load16(s.mu + j * H), inv = load16(c.inv + j * H);
    F16 dmu = load16(c.dmu + j * H), dsig = load16(c.dsig + j * H), cen = load16(c.cen + j * H);
    for (int i = i0; i < i0 + int(n); ++i) {
      const size_t at = i * stride + j * H, ij = size_t(i) * J + j;
      const F16 d = sub16(load16(v + at), mu), u = mul16(d, inv), p = bcast16(dp[ij]);
      const F16 pu = mul16(p, u);
      store16(dv + at, sub16(load16(dv + at), pu));
      dmu = add16(dmu, pu);
      dsig = add16(dsig, mul16(mul16(mul16(p, sub16(mul16(u, d), one)), half), inv));
      cen = add16(cen, mul16(bcast16(s.w[ij]), d));
    }
    store16(c.dmu + j * H, dmu);
    store16(c.dsig + j * H, dsig);
    store16(c.cen + j * H, cen);
  };
  for_row_blocks(I, J, rows);
}

// c.cen = sum_i w (V - mu) of M-step t (the last, which no E-step pass precedes).
inline void full_centred_pass(FullCaps& c, const float* v, const EmMStepState& s, int I, int J) {
  const size_t stride = size_t(J) * H;
  std::fill_n(c.cen, J * H, 0.f);
  for_row_blocks(I, J, [&](int i0, int j, auto n) {
    const F16 mu = load16(s.mu + j * H);
    F16 cen = load16(c.cen + j * H);
    for (int i = i0; i < i0 + int(n); ++i)
      cen = add16(cen, mul16(bcast16(s.w[size_t(i) * J + j]), sub16(load16(v + i * stride + j * H), mu)));
    store16(c.cen + j * H, cen);
  });
}

// M-step t's backward, per capsule j (em_m_step_backward_full's head): from
// dmu (J x 16; plus dcarry, M-step t+1's carry adjoint, when not nullptr),
// dsig and dloga (nullptr before the last iteration's: 0), da (the upstream
// gradient at the last iteration, else nullptr) and c.cen, to dbeta_a,
// dbeta_v, c.dm, c.ds and dl's scalars; dmu_prev (with mean_carry, nullptr at
// t = 0) gets the carry's adjoint of mu^{t-1}. dcarry may be dmu_prev: capsule
// j's is read before it is written.
inline void full_m_head(FullCaps& c, float* dmu_prev, float* dbeta_a, float* dbeta_v, const float* dmu,
                        const float* dcarry, const float* dsig, const float* dloga, const float* da,
                        const EmMStepState& s, const float* beta_v, float lambda, int I, int J,
                        const EmConfig& cfg) {
  const float c_norm = cfg.cost_norm ? 1.f / float(I) : 1.f;
  const EmLogitCoeffs k = em_logit_coeffs(cfg);
  const F16 s2_min = bcast16(cfg.sigma2_min);
  for (int j = 0; j < J; ++j) {
    const float S = s.S[j];
    const auto [dS, dL] = em_capsule_backward_head(dbeta_a, dbeta_v, da ? da[j] : 0.f, dloga ? dloga[j] : 0.f, s,
                                                   beta_v[j], lambda, c_norm, k, cfg.logit, j);
    const F16 mu = load16(s.mu + j * H), s2 = load16(s.sigma2 + j * H);
    const F16 dsig_j = dsig ? load16(dsig + j * H) : zero16();
    const F16 ds = zero_unless_gt16(add16(dsig_j, div16(bcast16(dL), s2)), s2, s2_min);
    F16 dmu_j = load16(dmu + j * H);
    if (dcarry) dmu_j = add16(dmu_j, load16(dcarry + j * H));
    F16 dm = sub16(dmu_j, mul16(add16(ds, ds), load16(c.cen + j * H)));
    if (cfg.mean_carry != 0.f) {
      if (dmu_prev) store16(dmu_prev + j * H, mul16(bcast16(cfg.mean_carry), dm));
      dm = mul16(dm, bcast16(1.f - cfg.mean_carry));
    }
    store16(c.dm + j * H, dm);
    store16(c.ds + j * H, ds);
    float mu_dm = 0.f;  // sum_h mu dm', in h order; only eps > 0 reads it
    if (cfg.eps != 0.f) {
      alignas(64) float m[H];
      store16(m, mu);
      for (int h = 0; h < H; ++h) mu_dm += m[h] * c.dm[j * H + h];
    }
    c.D[j] = S + cfg.eps;
    c.leak[j] = cfg.eps == 0.f ? 0.f : cfg.eps / c.D[j] * mu_dm;
    c.dS[j] = dS;
    c.g_mean[j] = 0.f;
  }
}

// M-step t's backward over the pairs: dV += w (dm' + 2 ds (V - mu)) and
// g_ij = sum_h (V - mu) (dm' + (V - mu) ds), parked in dl until its mean
// g_mean_j = sum_i w g is known; then dl (the adjoint of log R^t) and
// dla += its row sums. dl may hold E-step t's input: every row is read by
// full_dp_row before this overwrites it.
inline void full_m_pass(float* dv, float* dl, float* dla, FullCaps& c, const float* v, const EmMStepState& s,
                        int I, int J) {
  const size_t stride = size_t(J) * H;
  constexpr int kRows = 8;  // rows whose g are summed at once (pair_sums16x8)
  // Rows i0 .. i0 + n of capsule j; n a constant for whole blocks, so that
  // their t stay in registers.
  auto rows = [&](int i0, int j, auto n) {
    const F16 mu = load16(s.mu + j * H), dm = load16(c.dm + j * H), ds = load16(c.ds + j * H);
    const F16 ds2 = add16(ds, ds);  // 2 ds, exact
    F16 t[kRows];
    float g[kRows];
    for (int k = 0; k < int(n); ++k) {
      const size_t at = (i0 + k) * stride + j * H;
      const float wi = s.w[size_t(i0 + k) * J + j];
      const F16 d = sub16(load16(v + at), mu);
      store16(dv + at, add16(load16(dv + at), mul16(bcast16(wi), add16(dm, mul16(ds2, d)))));
      t[k] = mul16(d, add16(dm, mul16(d, ds)));
    }
    if (int(n) == kRows) pair_sums16x8(t, g);
    else
      for (int k = 0; k < int(n); ++k) g[k] = pair_sum16(t[k]);
    for (int k = 0; k < int(n); ++k) dl[size_t(i0 + k) * J + j] = g[k];
  };
  // After each block, g_mean_j += w_ij g_ij, i in order: a register of j at a
  // time, so that no j waits on a chain of kRows dependent scalar adds.
  for_row_blocks<kRows>(I, J, rows, [&](int i0, int i1) {
    for (int i = i0; i < i1; ++i) {
      const float* w = s.w + size_t(i) * J;
      const float* g = dl + size_t(i) * J;
      for_runs(
          size_t(J),
          [&](size_t k, auto l) {
            l.store(c.g_mean + k, addv(l.load(c.g_mean + k), mulv(l.load(w + k), l.load(g + k))));
          },
          [&](size_t k) { c.g_mean[k] += w[k] * g[k]; });
    }
  });
  for (int i = 0; i < I; ++i) {  // a register of j at a time, each lane the scalar line's operations
    const float* w = s.w + size_t(i) * J;
    float* r = dl + size_t(i) * J;
    for_runs(
        size_t(J),
        [&](size_t k, auto l) {
          const Vec wi = l.load(w + k);
          const Vec t = mulv(wi, addv(subv(l.load(r + k), l.load(c.g_mean + k)), l.load(c.leak + k)));
          l.store(r + k, addv(t, mulv(mulv(wi, l.load(c.D + k)), l.load(c.dS + k))));
        },
        [&](size_t k) { r[k] = w[k] * (r[k] - c.g_mean[k] + c.leak[k]) + w[k] * c.D[k] * c.dS[k]; });
  }
  add_row_sums(dla, [](int i) { return i; }, dl, I, J);  // dlog a_in_i += sum_j dl_ij, j in order
}

// The last iteration's M-step backward of one item: dmu, da (J x 16, J) the
// upstream gradients; dmu_prev as in full_m_head (nullptr with one iteration).
inline void full_last_m_step(FullCaps& c, float* dv, float* dl, float* dla, float* dmu_prev, float* dbeta_a,
                             float* dbeta_v, const float* dmu, const float* da, const float* v, const EmMStepState& s,
                             const float* beta_v, float lambda, int I, int J, const EmConfig& cfg) {
  full_centred_pass(c, v, s, I, J);
  full_m_head(c, dmu_prev, dbeta_a, dbeta_v, dmu, nullptr, nullptr, nullptr, da, s, beta_v, lambda, I, J, cfg);
  full_m_pass(dv, dl, dla, c, v, s, I, J);
}

// E-step t-1's and M-step t-1's backward of one item, from dp and c.dloga
// (full_dp_row's, every row). dl: overwritten with the adjoint of log R^{t-1};
// dcarry (with mean_carry): M-step t's adjoint of mu^{t-1}, added to the
// E-step's, then overwritten with M-step t-1's of mu^{t-2} (not when t-1 = 0,
// i.e. last). s: M-step t-1's state.
inline void full_e_and_m_step(FullCaps& c, float* dv, float* dl, float* dla, float* dcarry, float* dbeta_a,
                              float* dbeta_v, const float* dp, const float* v, const EmMStepState& s,
                              const float* beta_v, float lambda, bool last, int I, int J, const EmConfig& cfg) {
  full_e_pass(dv, c, dp, v, s, I, J);
  const float* carried = cfg.mean_carry != 0.f ? dcarry : nullptr;
  full_m_head(c, last ? nullptr : dcarry, dbeta_a, dbeta_v, c.dmu, carried, c.dsig, c.dloga, nullptr, s, beta_v,
              lambda, I, J, cfg);
  full_m_pass(dv, dl, dla, c, v, s, I, J);
}

// The dense full backward (em_backward_full_f32__scalar's contract), one batch
// item at a time. Scratch as the reference's: dl (I x J), dp (I x J, where the
// reference keeps g), dla (I), then dcarry at the reference's offset.
inline void backward_full_simd(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v, const float* dmu,
                               const float* da_out, const float* V, const EmState& st, int B, int I, int J,
                               const EmConfig& cfg) {
  const int T = cfg.iters;
  const size_t IJ = size_t(I) * J;
  float* dl = st.scratch.data();
  float* dp = dl + IJ;
  float* dla = dp + IJ;
  float* dcarry = dla + I + 2 * size_t(J) * H + J;
  const float* beta_v = st.hist.beta_v.data();
  FullCaps c;
  for (int b = 0; b < B; ++b) {
    const float* v = V + size_t(b) * IJ * H;
    float* dv = dV + size_t(b) * IJ * H;
    std::fill_n(dla, I, 0.f);
    full_last_m_step(c, dv, dl, dla, T > 1 ? dcarry : nullptr, dbeta_a, dbeta_v, dmu + size_t(b) * J * H,
                     da_out + size_t(b) * J, v, em_m_step_state(st, T - 1, b, B, I, J), beta_v,
                     em_lambda(cfg, T - 1), I, J, cfg);
    for (int t = T - 1; t > 0; --t) {  // log R^0 is the constant 1/J: its adjoint goes nowhere
      const float* log_r = em_m_step_state(st, t, b, B, I, J).log_r;
      std::fill_n(c.dloga, J, 0.f);
      for (int i = 0; i < I; ++i) {  // the log-softmax over the child's J parents
        const size_t row = size_t(i) * J;
        float sum = 0.f;
        for (int j = 0; j < J; ++j) sum += dl[row + j];
        full_dp_row(dp + row, c.dloga, dl + row, log_r + row, &sum, 0, J);
      }
      full_e_and_m_step(c, dv, dl, dla, dcarry, dbeta_a, dbeta_v, dp, v, em_m_step_state(st, t - 1, b, B, I, J),
                        beta_v, em_lambda(cfg, t - 1), t == 1, I, J, cfg);
    }
    // d log sigmoid(z) / dz = 1 - sigmoid(z) = -expm1(log a).
    const float* log_a_in = st.log_a_in.data() + size_t(b) * I;
    for (int i = 0; i < I; ++i) da_in_logit[size_t(b) * I + i] += dla[i] * -std::expm1(log_a_in[i]);
  }
}

}  // namespace
}  // namespace vg

// The exported full backward of one ISA: VG_EM_FULL_DEFINE(avx2) in em_routing_avx2.cpp.
#define VG_EM_FULL_DEFINE(isa)                                                                              \
  namespace vg {                                                                                            \
  void em_backward_full_f32__##isa(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,           \
                                   const float* dmu, const float* da_out, const float* V, const EmState& st, \
                                   int B, int I, int J, const EmConfig& cfg) {                              \
    backward_full_simd(dV, da_in_logit, dbeta_a, dbeta_v, dmu, da_out, V, st, B, I, J, cfg);                \
  }                                                                                                         \
  }
