// The EM-routing steps written once over two vector types. Each ISA's header
// (em_routing_{avx2,avx512,neon}.h, included by that ISA's files only)
// defines, in an anonymous namespace:
//   F16   one 16-float pose vector (one zmm, two ymm or four q registers):
//         zero16, load16, store16, bcast16, add16, sub16, mul16, div16,
//         fma16(a, b, acc) = acc + a b (fused), max16(x, lo) (keeps a NaN x),
//         zero_unless_gt16(v, x, lo) = v where x > lo else 0,
//         float dot16(a, b), scaled_dots16x8(pairs, c, add, out): out[k] =
//         c dot16(a_k, b_k) + add[k] (a multiply, then an add) for eight
//         pairs at once, summed transposed with dot16's additions and kept in
//         registers to the store (the same bits: kernels/em_dots.h),
//         float sum_log16(x) = sum_h log x_h,
//         float pair_sum16(t) = sum_h t_h in the scalar full backward's
//         pairwise order (em_backward_full_simd.h);
//   Vec   one register of the runs of exp and log (8, 16 or 4 floats):
//         bcastv, addv, subv, mulv, divv, maxv (std::max's), expv, logv, negv, neg_absv = -|x|,
//         min0v(z) = min(0, z) (keeps a NaN z), if_zerov(c, x, y) = c == 0 ? x : y,
//         zero_if_lessv(x, lo, y) = x < lo ? 0 : y, pow2v(n) = 2^n (n integral, -126..127);
//   for_runs(n, vec, scalar): vec(k, lanes) for each whole register of a run
//         of n floats (lanes.load / lanes.store), then the ISA's leftovers:
//         scalar(k) per float (AVX-512: after eight under a mask, as AVX2 splits
//         the run);
//   cols_of_rows(cols, x, stride): a lanes x lanes block transposed, cols[j]
//         lane k = x[k stride + j];
//   kMomentJ, the upper capsules whose means share one pass over the votes.
// An ISA file includes that header, then this one, which instantiates the
// steps in that same anonymous namespace: every ISA file keeps its own
// internally linked copy built with its flags (tools/check_isa_objects.sh).
// What rounds differently between ISAs (horizontal sums, sum_log16, a run's
// leftovers) is a primitive. The AVX2 and AVX-512 primitives round alike, so
// the two x86-64 variants give the same bits (--reproducible runs either);
// NEON's round their own way.
#pragma once
#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/em_dots.h"
#include "kernels/em_routing.h"

namespace vg {
namespace {

constexpr int H = kPoseDim;
constexpr int kLanes = sizeof(Vec) / sizeof(float);  // floats in one register of the runs

// exp_portable (em_routing.h), the same operations on a register: the same bits.
inline Vec exp_portablev(Vec x) {
  using C = ExpPortable;
  const Vec round = bcastv(C::round);
  const Vec n = subv(addv(mulv(x, bcastv(C::log2e)), round), round);
  Vec r = subv(x, mulv(n, bcastv(C::ln2_hi)));
  r = subv(r, mulv(n, bcastv(C::ln2_lo)));
  Vec p = addv(mulv(bcastv(C::p0), r), bcastv(C::p1));
  p = addv(mulv(p, r), bcastv(C::p2));
  p = addv(mulv(p, r), bcastv(C::p3));
  p = addv(mulv(p, r), bcastv(C::p4));
  p = addv(mulv(p, r), bcastv(C::p5));
  const Vec y = addv(addv(mulv(p, mulv(r, r)), r), bcastv(1.f));
  return zero_if_lessv(x, C::lo, mulv(y, pow2v(n)));  // lanes below lo: whatever n made of them, 0
}

// x[k] = exp(x[k]) / log(x[k]) for k < n.
inline void exp_n(float* x, size_t n) {
  for_runs(n, [&](size_t k, auto lanes) { lanes.store(x + k, expv(lanes.load(x + k))); },
           [&](size_t k) { x[k] = std::exp(x[k]); });
}
inline void log_n(float* x, size_t n) {
  for_runs(n, [&](size_t k, auto lanes) { lanes.store(x + k, logv(lanes.load(x + k))); },
           [&](size_t k) { x[k] = std::log(x[k]); });
}

// Rows of the routing's bookkeeping (one entry per upper capsule), a register
// at a time. Each lane is the one IEEE operation of the scalar loop it
// replaces (std::max's included), so these keep its bits on every ISA.
// m = max(m, x)
inline void max_n(float* m, const float* x, size_t n) {
  for_runs(n, [&](size_t k, auto l) { l.store(m + k, maxv(l.load(m + k), l.load(x + k))); },
           [&](size_t k) { m[k] = std::max(m[k], x[k]); });
}
// d = (x + c) - m
inline void plus_sub_n(float* d, const float* x, float c, const float* m, size_t n) {
  const Vec vc = bcastv(c);
  for_runs(n, [&](size_t k, auto l) { l.store(d + k, subv(addv(l.load(x + k), vc), l.load(m + k))); },
           [&](size_t k) { d[k] = x[k] + c - m[k]; });
}
// d = x - m
inline void sub_n(float* d, const float* x, const float* m, size_t n) {
  for_runs(n, [&](size_t k, auto l) { l.store(d + k, subv(l.load(x + k), l.load(m + k))); },
           [&](size_t k) { d[k] = x[k] - m[k]; });
}
// d = x - c
inline void sub_c_n(float* d, const float* x, float c, size_t n) {
  const Vec vc = bcastv(c);
  for_runs(n, [&](size_t k, auto l) { l.store(d + k, subv(l.load(x + k), vc)); }, [&](size_t k) { d[k] = x[k] - c; });
}
// d = x + c
inline void plus_n(float* d, const float* x, float c, size_t n) {
  const Vec vc = bcastv(c);
  for_runs(n, [&](size_t k, auto l) { l.store(d + k, addv(l.load(x + k), vc)); }, [&](size_t k) { d[k] = x[k] + c; });
}
// acc = acc + x
inline void add_n(float* acc, const float* x, size_t n) {
  for_runs(n, [&](size_t k, auto l) { l.store(acc + k, addv(l.load(acc + k), l.load(x + k))); },
           [&](size_t k) { acc[k] += x[k]; });
}
// Down the columns of an I x J block, a register of j at a time through every
// row i, so no row's result waits on the last one's store: per lane the
// row-by-row loops' operations in their order (the same bits).
// m_j = max(-inf, x_0j + c_0, x_1j + c_1, ...)
inline void col_max_plus(float* m, const float* x, const float* c, int I, size_t J) {
  for_runs(
      J,
      [&](size_t k, auto l) {
        Vec acc = bcastv(-INFINITY);
        for (int i = 0; i < I; ++i) acc = maxv(acc, addv(l.load(x + i * J + k), bcastv(c[i])));
        l.store(m + k, acc);
      },
      [&](size_t k) {
        float acc = -INFINITY;
        for (int i = 0; i < I; ++i) acc = std::max(acc, x[i * J + k] + c[i]);
        m[k] = acc;
      });
}
// s_j = 0 + x_0j + x_1j + ...
inline void col_sum(float* s, const float* x, int I, size_t J) {
  for_runs(
      J,
      [&](size_t k, auto l) {
        Vec acc = bcastv(0.f);
        for (int i = 0; i < I; ++i) acc = addv(acc, l.load(x + i * J + k));
        l.store(s + k, acc);
      },
      [&](size_t k) {
        float acc = 0.f;
        for (int i = 0; i < I; ++i) acc += x[i * J + k];
        s[k] = acc;
      });
}
// The rows' chains below run a register of rows at a time where J is whole
// registers, each lane one row's chain in j order (the block transposed,
// cols_of_rows), else eight rows side by side in scalar code: a sequential
// sum or max is a chain of dependent operations (4 cycles an add).

// acc[at(r)] += sum_j x_rj for rows r < rows of x (rows x J), each row's sum in
// j order, as the reference's loop adds them; the rows' places at(r) must differ.
template <class At>
inline void add_row_sums(float* acc, At at, const float* x, int rows, int J) {
  int r = 0;
  if (J % kLanes == 0)
    for (; r + kLanes <= rows; r += kLanes) {
      alignas(64) float s0[kLanes];
      for (int k = 0; k < kLanes; ++k) s0[k] = acc[at(r + k)];
      Vec s = Whole::load(s0), cols[kLanes];
      for (int j0 = 0; j0 < J; j0 += kLanes) {
        cols_of_rows(cols, x + size_t(r) * J + j0, size_t(J));
        for (int j = 0; j < kLanes; ++j) s = addv(s, cols[j]);
      }
      Whole::store(s0, s);
      for (int k = 0; k < kLanes; ++k) acc[at(r + k)] = s0[k];
    }
  for (; r + 8 <= rows; r += 8) {
    float s[8];
    for (int k = 0; k < 8; ++k) s[k] = acc[at(r + k)];
    for (int j = 0; j < J; ++j)
      for (int k = 0; k < 8; ++k) s[k] += x[size_t(r + k) * J + j];
    for (int k = 0; k < 8; ++k) acc[at(r + k)] = s[k];
  }
  for (; r < rows; ++r)
    for (int j = 0; j < J; ++j) acc[at(r)] += x[size_t(r) * J + j];
}

// m[r] = the largest of row r of x (rows x J), as std::max_element finds it:
// the first entry, then each later one that compares greater, in j order
// (maxv is std::max's a < b ? b : a).
inline void row_maxes(float* m, const float* x, int rows, int J) {
  auto fold = [](float acc, float v) { return acc < v ? v : acc; };
  int r = 0;
  if (J % kLanes == 0)
    for (; r + kLanes <= rows; r += kLanes) {
      Vec cols[kLanes];
      cols_of_rows(cols, x + size_t(r) * J, size_t(J));
      Vec s = cols[0];
      for (int j0 = 0; j0 < J; j0 += kLanes) {
        if (j0 > 0) cols_of_rows(cols, x + size_t(r) * J + j0, size_t(J));
        for (int j = j0 == 0 ? 1 : 0; j < kLanes; ++j) s = maxv(s, cols[j]);
      }
      Whole::store(m + r, s);
    }
  for (; r + 8 <= rows; r += 8) {
    float s[8];
    for (int k = 0; k < 8; ++k) s[k] = x[size_t(r + k) * J];
    for (int j = 1; j < J; ++j)
      for (int k = 0; k < 8; ++k) s[k] = fold(s[k], x[size_t(r + k) * J + j]);
    for (int k = 0; k < 8; ++k) m[r + k] = s[k];
  }
  for (; r < rows; ++r) {
    float s = x[size_t(r) * J];
    for (int j = 1; j < J; ++j) s = fold(s, x[size_t(r) * J + j]);
    m[r] = s;
  }
}
// x = x s
inline void mul_n(float* x, const float* s, size_t n) {
  for_runs(n, [&](size_t k, auto l) { l.store(x + k, mulv(l.load(x + k), l.load(s + k))); },
           [&](size_t k) { x[k] *= s[k]; });
}

// a = 1 / (1 + exp(-z)) and log a = min(z, 0) - log1p(exp(-|z|)) for n
// contiguous logits z, read from a (the M-step parks them there). log1p(u) for
// u in [0, 1] is log(w) u / (w - 1) with w = 1 + u (w - 1 exact): the rounding
// of 1 + u cancels (Goldberg), leaving ~3 ulp; u itself where w == 1.
inline void activations(float* a, float* log_a, size_t n) {
  for_runs(
      n,
      [&](size_t k, auto lanes) {
        const auto one = bcastv(1.f), z = lanes.load(a + k);
        const auto u = expv(neg_absv(z));
        const auto w = addv(one, u), wm1 = subv(w, one);
        const auto l1p = if_zerov(wm1, u, mulv(logv(w), divv(u, wm1)));
        lanes.store(log_a + k, subv(min0v(z), l1p));
        lanes.store(a + k, divv(one, addv(one, expv(negv(z)))));
      },
      [&](size_t k) {
        const float z = a[k];
        log_a[k] = std::min(z, 0.f) - std::log1p(std::exp(-std::fabs(z)));
        a[k] = 1.f / (1.f + std::exp(-z));
      });
}

// The M-step weights w_ij = R_ij a_i / (S_j + eps) and S_j = sum_i R_ij a_i
// for one batch item, as in em_m_step_f32__scalar, with the exps batched over
// the block; the normalisation multiplies by the reciprocal of its sum.
inline void m_step_weights(float* w, float* S, const float* log_r, const float* log_a, int I, int J, float eps) {
  const size_t n = size_t(I) * J;
  float inv[64];
  if (eps == 0.f) {
    // Log-domain normalisation: the largest term is exp(0) = 1.
    float m[64], z[64];
    col_max_plus(m, log_r, log_a, I, size_t(J));
    if (J % kLanes == 0) {
      // Rows of whole registers: each register's w = exp((log R + log a) - m)
      // and its column's sum in one pass down the column, each lane's
      // operations those of the three passes below in their order (the same bits).
      for (int k = 0; k < J; k += kLanes) {
        const Vec mk = Whole::load(m + k);
        Vec acc = bcastv(0.f);
        for (int i = 0; i < I; ++i) {
          const Vec e = expv(subv(addv(Whole::load(log_r + size_t(i) * J + k), bcastv(log_a[i])), mk));
          Whole::store(w + size_t(i) * J + k, e);
          acc = addv(acc, e);
        }
        Whole::store(z + k, acc);
      }
    } else {
      for (int i = 0; i < I; ++i) plus_sub_n(w + size_t(i) * J, log_r + size_t(i) * J, log_a[i], m, size_t(J));
      exp_n(w, n);
      col_sum(z, w, I, size_t(J));
    }
    exp_n(m, size_t(J));
    for (int j = 0; j < J; ++j) {
      inv[j] = 1.f / z[j];
      S[j] = m[j] * z[j];  // exp(max) z
    }
  } else {
    // The seed's form: R a / (sum R a + eps).
    for (int i = 0; i < I; ++i) plus_n(w + size_t(i) * J, log_r + size_t(i) * J, log_a[i], size_t(J));
    exp_n(w, n);
    col_sum(S, w, I, size_t(J));
    for (int j = 0; j < J; ++j) inv[j] = 1.f / (S[j] + eps);
  }
  if (J % kLanes == 0) {  // a register of 1 / S held down its column, as the weights above
    for (int k = 0; k < J; k += kLanes) {
      const Vec v = Whole::load(inv + k);
      for (int i = 0; i < I; ++i) Whole::store(w + size_t(i) * J + k, mulv(Whole::load(w + size_t(i) * J + k), v));
    }
  } else {
    for (int i = 0; i < I; ++i) mul_n(w + size_t(i) * J, inv, size_t(J));
  }
}

// z = lambda (beta_a - cost), cost = (16 beta_v + sum_h log(sigma2) / 2) S
// [/ I with cost_norm], as in em_m_step_f32__scalar.
// The official form (cfg.logit): z = lambda (-cost - 5000 beta_a), cost =
// (kv beta_v + lsum) S [/ I], kv = 16 (ln 2 pi + 1).
inline float logit(float lsum, float S, float beta_a, float beta_v, int I, const EmConfig& cfg, float kv_official) {
  if (cfg.logit == EmLogit::official) {
    float cost = (kv_official * beta_v + lsum) * S;
    if (cfg.cost_norm) cost /= float(I);
    return cfg.lambda * (-cost - 5000.f * beta_a);
  }
  float cost = (float(kPoseDim) * beta_v + 0.5f * lsum) * S;
  if (cfg.cost_norm) cost /= float(I);
  return cfg.lambda * (beta_a - cost);
}

// The M-step's moments of upper capsules j0 .. j0+NJ-1: mu = sum_i w V,
// sigma2 = max(sum_i w (V - mu)^2, floor), and lsum[q] = sum_h log sigma2.
// v, w, mu, s2: this b's votes, weights, outputs. With prev (this b's
// mu_prev, else nullptr) mu = keep sum_i w V + carry prev. The means run NJ
// independent chains in one pass (AVX-512: a child's whole row of 16 parents,
// 1 KB read in order), the variances at most 8 at a time (each chain holds its
// mean and its sum); every chain adds over i in order, so NJ changes no bit.
template <int NJ>
inline void moments(float* mu, float* s2, float* lsum, const float* v, const float* w, int j0, int I, int J,
                    F16 s2_min, const float* prev, float keep, float carry) {
  const size_t stride = size_t(J) * H;  // from capsule i to i+1
  F16 m[NJ], s[NJ];
  for (int q = 0; q < NJ; ++q) m[q] = s[q] = zero16();
  // Each row's pointers formed once, so its NJ loads are one base and
  // constant offsets (per-q indices had the compiler spill NJ of them).
  for (int i = 0; i < I; ++i) {
    const float* vi = v + i * stride + j0 * H;
    const float* wi = w + i * J + j0;
    for (int q = 0; q < NJ; ++q) m[q] = fma16(bcast16(wi[q]), load16(vi + q * H), m[q]);
  }
  if (prev)
    for (int q = 0; q < NJ; ++q) m[q] = fma16(bcast16(carry), load16(prev + (j0 + q) * H), mul16(bcast16(keep), m[q]));
  constexpr int NV = std::min(NJ, 8);
  for (int q0 = 0; q0 < NJ; q0 += NV)
    for (int i = 0; i < I; ++i) {
      const float* vi = v + i * stride + (j0 + q0) * H;
      const float* wi = w + i * J + j0 + q0;
      for (int q = 0; q < NV; ++q) {
        const F16 d = sub16(load16(vi + q * H), m[q0 + q]);
        s[q0 + q] = fma16(mul16(bcast16(wi[q]), d), d, s[q0 + q]);
      }
    }
  for (int q = 0; q < NJ; ++q) {
    s[q] = max16(s[q], s2_min);
    store16(mu + (j0 + q) * H, m[q]);
    store16(s2 + (j0 + q) * H, s[q]);
    lsum[q] = sum_log16(s[q]);
  }
}

// The M-step of items b0 <= b < b1 (every array indexed as for the whole batch).
inline void m_step_items(float* mu, float* a_out, EmState& st, const float* V, const float* beta_a,
                         const float* beta_v, int b0, int b1, int I, int J, const EmConfig& cfg) {
  const F16 s2_min = bcast16(cfg.sigma2_min);
  const size_t n = size_t(I) * J;
  const bool carry = cfg.mean_carry != 0.f;
  const float keep = 1.f - cfg.mean_carry;
  EmConfig official;
  official.logit = EmLogit::official;
  const float kv_official = em_logit_coeffs(official).kv;
  for (int b = b0; b < b1; ++b) {
    float* w = st.w.data() + size_t(b) * n;  // w[i*J + j]
    const float* log_r = st.log_r.data() + size_t(b) * n;
    const float* log_a = st.log_a_in.data() + size_t(b) * I;
    float* S = st.sum_ra.data() + size_t(b) * J;
    if (!st.frozen) m_step_weights(w, S, log_r, log_a, I, J, cfg.eps);

    // kMomentJ upper capsules at a time (independent FMA chains hide
    // latency), then 4 where kMomentJ is larger, then one.
    const float* v = V + size_t(b) * n * H;
    float* mu_b = mu + size_t(b) * J * H;
    float* s2_b = st.sigma2.data() + size_t(b) * J * H;
    float* lsum = st.log_s2_sum.data() + size_t(b) * J;
    float* z = a_out + size_t(b) * J;
    const float* prev = carry ? st.mu_prev.data() + size_t(b) * J * H : nullptr;
    int j = 0;
    auto blocks = [&]<int NJ>() {
      for (; j + NJ <= J; j += NJ) {
        moments<NJ>(mu_b, s2_b, lsum + j, v, w, j, I, J, s2_min, prev, keep, cfg.mean_carry);
        for (int q = j; q < j + NJ; ++q) z[q] = logit(lsum[q], S[q], beta_a[q], beta_v[q], I, cfg, kv_official);
      }
    };
    blocks.template operator()<kMomentJ>();
    if constexpr (kMomentJ > 4) blocks.template operator()<4>();
    blocks.template operator()<1>();
  }
  activations(a_out + size_t(b0) * J, st.log_a_out.data() + size_t(b0) * J, size_t(b1 - b0) * J);
}

inline void m_step_simd(float* mu, float* a_out, EmState& st, const float* V, const float* beta_a,
                        const float* beta_v, int B, int I, int J, const EmConfig& cfg) {
  m_step_items(mu, a_out, st, V, beta_a, beta_v, 0, B, I, J, cfg);
}

// Rows i of the E-step's softmax per exp/log batch (bounded stack use).
constexpr int kRowBuf = 512;

// The E-step's softmax over j for `rows` consecutive lower capsules, shifted
// by its max: log R = lr - (max + log(sum_j exp(lr - max))). On entry
// log_r[r*J + j] holds lr, t[r*J + j] = lr - max and mx[r] the max of row r;
// lse is scratch of `rows` floats.
inline void softmax_rows(float* log_r, float* t, const float* mx, float* lse, int rows, int J) {
  exp_n(t, size_t(rows) * J);
  for (int r = 0; r < rows; ++r) {
    float z = 0.f;
    for (int j = 0; j < J; ++j) z += t[r * J + j];
    lse[r] = z;
  }
  log_n(lse, size_t(rows));
  for (int r = 0; r < rows; ++r) {
    const float l = mx[r] + lse[r];
    for (int j = 0; j < J; ++j) log_r[r * J + j] -= l;
  }
}

// One child's log-likelihoods over J upper capsules:
// lr[j] = -1/2 (v_j - mu_j)^T diag(inv_s2_j) (v_j - mu_j) + norm[j], eight
// quadratic forms summed at once (scaled_dots16x8), the rest one by one; the same bits
// either way.
inline void log_likelihoods(float* lr, const float* v, const float* mu, const float* inv_s2, const float* norm, int J) {
  int j0 = 0;
  for (; j0 + 8 <= J; j0 += 8) {
    scaled_dots16x8(
        [&](int k, F16& a, F16& b) {
          const int j = j0 + k;
          b = sub16(load16(v + j * H), load16(mu + j * H));
          a = mul16(b, load16(inv_s2 + j * H));
        },
        -0.5f, norm + j0, lr + j0);
  }
  for (int j = j0; j < J; ++j) {
    const F16 d = sub16(load16(v + j * H), load16(mu + j * H));
    lr[j] = -0.5f * dot16(mul16(d, load16(inv_s2 + j * H)), d) + norm[j];
  }
}

// One item's terms of its log-likelihoods, per parent j: 1 / sigma2 (d^2 /
// sigma2 multiplies by it) and norm_j = -1/2 sum_h log(2 pi sigma2_jh) + log a_j.
// lsum, where given: the M-step's sum_log16 of these sigma2 (this ISA's, the
// same bits), not formed again.
inline void likelihood_terms(float* inv_s2, float* norm, const float* sigma2, const float* log_a_out, int J,
                             const float* lsum = nullptr) {
  const float log_2pi_16 = float(16 * std::log(2.0 * std::numbers::pi));
  for (int j = 0; j < J; ++j) {
    const F16 x = load16(sigma2 + size_t(j) * H);
    norm[j] = -0.5f * ((lsum ? lsum[j] : sum_log16(x)) + log_2pi_16) + log_a_out[j];
    store16(inv_s2 + j * H, div16(bcast16(1.f), x));
  }
}

// lr of items b0 <= b < b1 (em_likelihoods_f32__<isa>; the E-steps' first part);
// log_s2_sum as likelihood_terms' lsum, indexed as sigma2's sums.
inline void likelihood_items(float* lr, const float* V, const float* mu, const float* sigma2, const float* log_a_out,
                             int b0, int b1, int I, int J, const float* log_s2_sum = nullptr) {
  alignas(64) float inv_s2[64 * H];
  float norm[64];
  for (int b = b0; b < b1; ++b) {
    likelihood_terms(inv_s2, norm, sigma2 + size_t(b) * J * H, log_a_out + size_t(b) * J, J,
                     log_s2_sum ? log_s2_sum + size_t(b) * J : nullptr);
    const float* mu_b = mu + size_t(b) * J * H;
    const float* v_b = V + size_t(b) * I * J * H;
    float* lr_b = lr + size_t(b) * I * J;
    // Eight parents at a time through every child, their mu and 1 / sigma2
    // held in registers where the ISA has them (AVX-512: 16 of 32), so a vote
    // costs one load, not three (a child at a time reloaded both). Each vote's
    // operations are log_likelihoods' (the same bits).
    int j0 = 0;
    for (; j0 + 8 <= J; j0 += 8) {
      F16 m[8], is[8];
      for (int k = 0; k < 8; ++k) {
        m[k] = load16(mu_b + (j0 + k) * H);
        is[k] = load16(inv_s2 + (j0 + k) * H);
      }
      for (int i = 0; i < I; ++i) {
        const float* v = v_b + (size_t(i) * J + j0) * H;
        scaled_dots16x8(
            [&](int k, F16& a, F16& d) {
              d = sub16(load16(v + k * H), m[k]);
              a = mul16(d, is[k]);
            },
            -0.5f, norm + j0, lr_b + size_t(i) * J + j0);
      }
    }
    if (j0 < J)
      for (int i = 0; i < I; ++i)
        for (int j = j0; j < J; ++j) {
          const F16 d = sub16(load16(v_b + (size_t(i) * J + j) * H), load16(mu_b + j * H));
          lr_b[size_t(i) * J + j] = -0.5f * dot16(mul16(d, load16(inv_s2 + j * H)), d) + norm[j];
        }
  }
}

inline void e_step_simd(EmState& st, const float* V, const float* mu, int B, int I, int J) {
  alignas(64) float inv_s2[64 * H];
  float norm[64], t[kRowBuf], mx[kRowBuf], lse[kRowBuf];
  const int rows = std::max(1, kRowBuf / J);  // rows i per exp batch
  for (int b = 0; b < B; ++b) {
    likelihood_terms(inv_s2, norm, st.sigma2.data() + size_t(b) * J * H, st.log_a_out.data() + size_t(b) * J, J);
    for (int i0 = 0; i0 < I; i0 += rows) {
      const int i1 = std::min(I, i0 + rows);
      for (int i = i0; i < i1; ++i) {
        float* lr = st.log_r.data() + (size_t(b) * I + i) * J;
        const float* v = V + (size_t(b) * I + i) * J * H;
        log_likelihoods(lr, v, mu + size_t(b) * J * H, inv_s2, norm, J);
        float m = -INFINITY;
        for (int j = 0; j < J; ++j) m = std::max(m, lr[j]);
        mx[i - i0] = m;
        for (int j = 0; j < J; ++j) t[(i - i0) * J + j] = lr[j] - m;
      }
      softmax_rows(st.log_r.data() + (size_t(b) * I + i0) * J, t, mx, lse, i1 - i0, J);
    }
  }
}

inline void backward_simd(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu, const float* da_out,
                          const float* V, const float* mu, const float* a_out, const EmState& st, int B, int I,
                          int J, const EmConfig& cfg) {
  const F16 s2_min = bcast16(cfg.sigma2_min);
  const EmLogitCoeffs k = em_logit_coeffs(cfg);  // paper: 1, 16, 1/2 (exact products)
  const bool carry = cfg.mean_carry != 0.f;
  const F16 keep = bcast16(1.f - cfg.mean_carry);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < J; ++j) {
      const size_t bj = size_t(b) * J + j;
      const float a = a_out[bj];
      const float dz = da_out[bj] * a * (1.f - a);
      if (cfg.logit == EmLogit::paper) dbeta_a[j] += cfg.lambda * dz;  // the paper's form, its fingerprints' order
      else dbeta_a[j] += k.ka * cfg.lambda * dz;
      const float dcost = -cfg.lambda * dz;
      // The factor of (kv beta_v + kl L) in the cost: S, or S / I with cost_norm.
      const float S = cfg.cost_norm ? st.sum_ra[bj] / float(I) : st.sum_ra[bj];
      dbeta_v[j] += k.kv * S * dcost;
      // 2 dsigma2 = 2 (dcost S kl) / sigma2, 0 where sigma2 sits at its floor.
      const F16 x = load16(st.sigma2.data() + bj * H);
      const F16 g = zero_unless_gt16(div16(bcast16(dcost * S * k.kl), x), x, s2_min);
      const F16 t = add16(g, g), u = load16(mu + bj * H);
      F16 e = load16(dmu + bj * H);
      const size_t stride = size_t(J) * H;  // from capsule i to i+1
      const float* w = st.w.data() + size_t(b) * I * J + j;
      const float* v = V + (size_t(b) * I * J + j) * H;
      float* dv = dV + (size_t(b) * I * J + j) * H;
      if (carry) {  // dmu' = keep (dmu - 2 dsigma2 sum_i w (V - mu)), as the scalar reference
        F16 c = zero16();
        for (int i = 0; i < I; ++i) c = fma16(bcast16(w[size_t(i) * J]), sub16(load16(v + i * stride), u), c);
        e = mul16(keep, sub16(e, mul16(t, c)));
      }
      for (int i = 0; i < I; ++i, w += J, v += stride, dv += stride)  // dV += w (dmu + 2 dsigma2 (V - mu))
        store16(dv, fma16(bcast16(*w), fma16(t, sub16(load16(v), u), e), load16(dv)));
    }
}

}  // namespace
}  // namespace vg

// The exported steps of one ISA: VG_EM_DEFINE(avx2) in em_routing_avx2.cpp.
#define VG_EM_DEFINE(isa)                                                                                     \
  namespace vg {                                                                                              \
  void em_m_step_f32__##isa(float* mu, float* a_out, EmState& st, const float* V, const float* beta_a,       \
                            const float* beta_v, int B, int I, int J, const EmConfig& cfg) {                  \
    m_step_simd(mu, a_out, st, V, beta_a, beta_v, B, I, J, cfg);                                              \
  }                                                                                                           \
  void em_m_weights_f32__##isa(float* w, float* S, const float* log_r, const float* log_a, int B, int I, int J, \
                               float eps) {                                                                 \
    const size_t n = size_t(I) * J;                                                                           \
    for (int b = 0; b < B; ++b) m_step_weights(w + b * n, S + size_t(b) * J, log_r + b * n, log_a + size_t(b) * I, I, J, eps); \
  }                                                                                                           \
  void em_e_step_f32__##isa(EmState& st, const float* V, const float* mu, int B, int I, int J) {              \
    e_step_simd(st, V, mu, B, I, J);                                                                          \
  }                                                                                                           \
  void em_likelihoods_f32__##isa(float* lr, const float* V, const float* mu, const float* sigma2,             \
                                 const float* log_a_out, int B, int I, int J) {                               \
    likelihood_items(lr, V, mu, sigma2, log_a_out, 0, B, I, J);                                               \
  }                                                                                                           \
  void em_exp_portable_f32__##isa(float* x, size_t n) {                                                       \
    for_runs(n, [&](size_t k, auto l) { l.store(x + k, exp_portablev(l.load(x + k))); },                      \
             [&](size_t k) { x[k] = exp_portable(x[k]); });                                                   \
  }                                                                                                           \
  void em_backward_f32__##isa(float* dV, float* dbeta_a, float* dbeta_v, const float* dmu,                    \
                              const float* da_out, const float* V, const float* mu, const float* a_out,       \
                              const EmState& st, int B, int I, int J, const EmConfig& cfg) {                  \
    backward_simd(dV, dbeta_a, dbeta_v, dmu, da_out, V, mu, a_out, st, B, I, J, cfg);                         \
  }                                                                                                           \
  void em_dots16x8_f32__##isa(const float* a, const float* b, float c, const float* add, float* out,          \
                              bool transposed) {                                                              \
    if (transposed)                                                                                           \
      scaled_dots16x8([&](int k, F16& x, F16& y) { x = load16(a + 16 * k), y = load16(b + 16 * k); }, c, add, \
                      out);                                                                                   \
    else                                                                                                      \
      for (int k = 0; k < 8; ++k) out[k] = c * dot16(load16(a + 16 * k), load16(b + 16 * k)) + add[k];       \
  }                                                                                                           \
  void em_row_folds_f32__##isa(float* maxes, float* sums, const float* x, int rows, int J) {                  \
    row_maxes(maxes, x, rows, J);                                                                             \
    add_row_sums(sums, [](int r) { return r; }, x, rows, J);                                                  \
  }                                                                                                           \
  void em_pair_sums16x8_f32__##isa(const float* t, float* out, bool transposed) {                              \
    F16 x[8];                                                                                                 \
    for (int k = 0; k < 8; ++k) x[k] = load16(t + 16 * k);                                                    \
    if (transposed)                                                                                           \
      pair_sums16x8(x, out);                                                                                  \
    else                                                                                                      \
      for (int k = 0; k < 8; ++k) out[k] = pair_sum16(x[k]);                                                  \
  }                                                                                                           \
  }
