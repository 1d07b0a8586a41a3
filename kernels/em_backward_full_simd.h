// The full backward of EM routing (EmGrad::full), written once over the F16
// primitives of the ISA headers em_routing_{avx2,avx512,neon}.h. An ISA file
// includes its header, em_routing_simd.h, then this one; the code lands in
// that file's anonymous namespace, built with its flags. The per-item pieces
// below serve the dense kernel (VG_EM_FULL_DEFINE, an item per batch entry)
// and the convolutional one (conv_em_routing_simd.h, an item per window).
//
// The formulas are the scalar reference's (em_routing_scalar.cpp, above
// em_m_step_backward_full); only the schedule differs:
//  - every loop runs per upper capsule j over its I votes, a pose (16 floats)
//    per register operation, the sums over i held in registers;
//  - E-step t-1's backward and M-step t-1's backward run back to back per
//    capsule j (E-step t-1 of capsule j needs only M-step t's adjoints, and
//    M-step t-1 of capsule j only E-step t-1's of capsule j), so the votes of
//    capsule j are fetched from memory once per iteration and read again from
//    L1; the E-step's pass also forms M-step t-1's sum_i w (V - mu), whose
//    V - mu is the E-step's own.
// Each float operation is the scalar reference's, on the same operands in the
// same order: no FMAs, sums over i in i order, the sum over h of g through
// pair_sum16 (the reference's pairwise order), the few sequential sums and
// every exp and expm1 as scalar code. The results are the reference's bit for
// bit on every ISA, which tests/test_em_routing.cpp and
// tests/test_conv_em_routing_backward.cpp assert.
#pragma once
#include <algorithm>
#include <cmath>

#include "kernels/em_routing.h"

namespace vg {
namespace {

// What M-step t's backward of capsule j takes in: the adjoints of mu_j, of the
// clamped sigma2_j and of log a_j.
struct FullColumnIn {
  F16 dmu, dsig;
  float dloga;
};

// M-step t's backward of capsule j of one item (em_m_step_backward_full's
// loop body for one j). v, dv: the item's votes and their gradient (I x J x 16);
// dl: the item's adjoint of log R^t (I x J), column j written; da: &da_out_j
// for the last iteration, else nullptr; centred: sum_i w_ij (V_ij - mu_j) when
// the caller formed it, else nullptr (formed here, one more pass over the
// votes); dmu_prev: the carry's adjoint of mu^{t-1} (J x 16), nullptr at t = 0.
inline void full_m_column(float* dv, float* dl, float* dmu_prev, float* dbeta_a, float* dbeta_v,
                          const FullColumnIn& in, const float* da, const F16* centred, const float* v,
                          const EmMStepState& s, const float* beta_v, float lambda, int j, int I, int J,
                          const EmConfig& cfg) {
  const size_t stride = size_t(J) * H;  // from vote i to i+1
  const float c = cfg.cost_norm ? 1.f / float(I) : 1.f;
  const EmLogitCoeffs k = em_logit_coeffs(cfg);
  const float one_minus_a = s.a[j] <= 0.5f ? 1.f - s.a[j] : -std::expm1(s.log_a[j]);
  const float dz = ((da ? *da * s.a[j] : 0.f) + in.dloga) * one_minus_a;
  if (cfg.logit == EmLogit::paper) dbeta_a[j] += lambda * dz;
  else dbeta_a[j] += k.ka * lambda * dz;
  const float dcost = -lambda * dz;
  const float S = s.S[j];
  dbeta_v[j] += k.kv * c * S * dcost;
  const float dS = c * (k.kv * beta_v[j] + k.kl * s.L[j]) * dcost;
  const float dL = k.kl * c * S * dcost;
  const F16 mu = load16(s.mu + j * H), s2 = load16(s.sigma2 + j * H);
  const F16 ds = zero_unless_gt16(add16(in.dsig, div16(bcast16(dL), s2)), s2, bcast16(cfg.sigma2_min));
  const F16 ds2 = add16(ds, ds);  // 2 ds, exact
  const float* w = s.w + j;       // w_ij at w[i J]
  v += j * H;
  dv += j * H;
  F16 cen;
  if (centred) {
    cen = *centred;
  } else {
    cen = zero16();
    for (int i = 0; i < I; ++i) cen = add16(cen, mul16(bcast16(w[size_t(i) * J]), sub16(load16(v + i * stride), mu)));
  }
  F16 dm = sub16(in.dmu, mul16(ds2, cen));
  if (cfg.mean_carry != 0.f) {
    if (dmu_prev) store16(dmu_prev + j * H, mul16(bcast16(cfg.mean_carry), dm));
    dm = mul16(dm, bcast16(1.f - cfg.mean_carry));
  }
  float mu_dm = 0.f;  // sum_h mu dm', in h order; only eps > 0 reads it
  if (cfg.eps != 0.f) {
    alignas(64) float m[H], d[H];
    store16(m, mu);
    store16(d, dm);
    for (int h = 0; h < H; ++h) mu_dm += m[h] * d[h];
  }
  // dV += w (dm' + 2 ds (V - mu)); g_i = sum_h (V - mu) (dm' + (V - mu) ds),
  // parked in dl's column until its mean is known.
  float g_mean = 0.f;
  for (int i = 0; i < I; ++i) {
    const float wi = w[size_t(i) * J];
    const F16 d = sub16(load16(v + i * stride), mu);
    float* dvi = dv + i * stride;
    store16(dvi, add16(load16(dvi), mul16(bcast16(wi), add16(dm, mul16(ds2, d)))));
    const float gi = pair_sum16(mul16(d, add16(dm, mul16(d, ds))));
    dl[size_t(i) * J + j] = gi;
    g_mean += wi * gi;
  }
  const float D = S + cfg.eps;
  const float leak = cfg.eps == 0.f ? 0.f : cfg.eps / D * mu_dm;
  for (int i = 0; i < I; ++i) {
    const float wi = w[size_t(i) * J];
    float& l = dl[size_t(i) * J + j];
    l = wi * (l - g_mean + leak) + wi * D * dS;
  }
}

// E-step t-1's backward of capsule j of one item (the reference's
// em_e_pair_backward over i for one j): from dl (column j: the adjoint of
// log R^t) and Rs (column j: R^t_ij times the adjoint's sum over the parents
// child i feeds, exactly the product the reference forms) to M-step t-1's
// adjoints of capsule j, with dV -= dp (V - mu) / sigma2 on the way. s: M-step
// t-1's state. *centred gets sum_i w_ij (V_ij - mu_j) for M-step t-1.
inline FullColumnIn full_e_column(float* dv, F16* centred, const float* dl, const float* Rs, const float* v,
                                  const EmMStepState& s, int j, int I, int J) {
  const size_t stride = size_t(J) * H;
  const F16 mu = load16(s.mu + j * H), inv = div16(bcast16(1.f), load16(s.sigma2 + j * H));
  const F16 one = bcast16(1.f), half = bcast16(0.5f);
  const float* w = s.w + j;
  v += j * H;
  dv += j * H;
  F16 dmu = zero16(), dsig = zero16(), cen = zero16();
  float dloga = 0.f;
  for (int i = 0; i < I; ++i) {
    const float dp = dl[size_t(i) * J + j] - Rs[size_t(i) * J + j];
    dloga += dp;
    const F16 d = sub16(load16(v + i * stride), mu), u = mul16(d, inv), pdp = bcast16(dp);
    const F16 pu = mul16(pdp, u);
    float* dvi = dv + i * stride;
    store16(dvi, sub16(load16(dvi), pu));
    dmu = add16(dmu, pu);
    dsig = add16(dsig, mul16(mul16(mul16(pdp, sub16(mul16(u, d), one)), half), inv));
    cen = add16(cen, mul16(bcast16(w[size_t(i) * J]), d));
  }
  *centred = cen;
  return {dmu, dsig, dloga};
}

// R_ij times the reference's sum: exp underflows to 0 below -104, as there.
inline float full_r_times(float lr, float sum) { return (lr < -104.f ? 0.f : std::exp(lr)) * sum; }

// dlog a_in_i += sum_j dl_ij, j in order (the reference's last loop).
inline void full_add_rows(float* dla, const float* dl, int I, int J) {
  for (int i = 0; i < I; ++i)
    for (int j = 0; j < J; ++j) dla[i] += dl[size_t(i) * J + j];
}

// The last iteration's M-step backward of one item: dmu, da (J x 16, J) the
// upstream gradients; dmu_prev as in full_m_column (nullptr with one iteration).
inline void full_last_m_step(float* dv, float* dl, float* dla, float* dmu_prev, float* dbeta_a, float* dbeta_v,
                             const float* dmu, const float* da, const float* v, const EmMStepState& s,
                             const float* beta_v, float lambda, int I, int J, const EmConfig& cfg) {
  for (int j = 0; j < J; ++j) {
    const FullColumnIn in{load16(dmu + j * H), zero16(), 0.f};
    full_m_column(dv, dl, dmu_prev, dbeta_a, dbeta_v, in, da + j, nullptr, v, s, beta_v, lambda, j, I, J, cfg);
  }
  full_add_rows(dla, dl, I, J);
}

// E-step t-1's and M-step t-1's backward of one item, capsule by capsule. In:
// dl (the adjoint of log R^t, overwritten with that of log R^{t-1}), Rs (see
// full_e_column), dcarry (with mean_carry: M-step t's adjoint of mu^{t-1},
// added to the E-step's, then overwritten with M-step t-1's adjoint of mu^{t-2};
// not overwritten when t-1 = 0, i.e. when last is true). s: M-step t-1's state.
inline void full_e_and_m_step(float* dv, float* dl, float* dla, float* dcarry, float* dbeta_a, float* dbeta_v,
                              const float* Rs, const float* v, const EmMStepState& s, const float* beta_v,
                              float lambda, bool last, int I, int J, const EmConfig& cfg) {
  const bool carry = cfg.mean_carry != 0.f;
  for (int j = 0; j < J; ++j) {
    F16 cen;
    FullColumnIn in = full_e_column(dv, &cen, dl, Rs, v, s, j, I, J);
    if (carry) in.dmu = add16(in.dmu, load16(dcarry + j * H));
    full_m_column(dv, dl, last ? nullptr : dcarry, dbeta_a, dbeta_v, in, nullptr, &cen, v, s, beta_v, lambda, j, I,
                  J, cfg);
  }
  full_add_rows(dla, dl, I, J);
}

// The dense full backward (em_backward_full_f32__scalar's contract), one batch
// item at a time. Scratch as the reference's: dl (I x J), Rs (I x J, where the
// reference keeps g), dla (I), then dcarry at the reference's offset.
inline void backward_full_simd(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v, const float* dmu,
                               const float* da_out, const float* V, const EmState& st, int B, int I, int J,
                               const EmConfig& cfg) {
  const int T = cfg.iters;
  const size_t IJ = size_t(I) * J;
  float* dl = st.scratch.data();
  float* Rs = dl + IJ;
  float* dla = Rs + IJ;
  float* dcarry = dla + I + 2 * size_t(J) * H + J;
  const float* beta_v = st.hist.beta_v.data();
  for (int b = 0; b < B; ++b) {
    const float* v = V + size_t(b) * IJ * H;
    float* dv = dV + size_t(b) * IJ * H;
    std::fill_n(dla, I, 0.f);
    full_last_m_step(dv, dl, dla, T > 1 ? dcarry : nullptr, dbeta_a, dbeta_v, dmu + size_t(b) * J * H,
                     da_out + size_t(b) * J, v, em_m_step_state(st, T - 1, b, B, I, J), beta_v,
                     em_lambda(cfg, T - 1), I, J, cfg);
    for (int t = T - 1; t > 0; --t) {  // log R^0 is the constant 1/J: its adjoint goes nowhere
      const float* log_r = em_m_step_state(st, t, b, B, I, J).log_r;
      for (int i = 0; i < I; ++i) {  // the log-softmax over the child's J parents
        float sum = 0.f;
        for (int j = 0; j < J; ++j) sum += dl[size_t(i) * J + j];
        for (int j = 0; j < J; ++j) Rs[size_t(i) * J + j] = full_r_times(log_r[size_t(i) * J + j], sum);
      }
      full_e_and_m_step(dv, dl, dla, dcarry, dbeta_a, dbeta_v, Rs, v, em_m_step_state(st, t - 1, b, B, I, J),
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
