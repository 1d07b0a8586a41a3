// EM routing over the windows of a convolutional capsule layer (Hinton, Sabour
// & Frosst 2018, ConvCaps1 and ConvCaps2). Shapes are those of the layer's
// votes (kernels/conv_votes.h); row-major float32, 4x4 poses as 16 floats:
//   V           B x Ho x Wo x I x J x 16   votes, I = kh kw Ci children of a
//                                          window, J = Co parent types
//   a_in_logit  B x H x W x Ci             child activations as logits (a = sigmoid),
//                                          on the child grid, gathered per window
//   beta_a, beta_v  J                      per parent type, shared over positions
//   mu          B x Ho x Wo x J x 16       parent poses
//   a_out       B x Ho x Wo x J            parent activations
// A parent (window p, type j) has the dense M-step over its window's I
// children (em_routing.h's, with the window as the batch item). The E-step
// differs: a child feeds every window that contains it, and its assignments
// are normalised over all of them:
//   paper     R_{c,(p,j)} = softmax over every (p', j') with p' containing c of
//             (log p_{c,(p',j')} + log a_{p'j'}): each child's assignments sum
//             to 1 ("each capsule in layer L receives feedback from at most
//             K x K capsules of each type in L+1", the paper on convolutional
//             capsules; IBM's implementation (Gritzman 2019) normalises the
//             same way).
//   official  google-research capsule_em/em_layers.py, update_conv_routing:
//             posterior = prior_exp / sum_prior, where sum_prior sums over the
//             windows of each (input type, output type) separately, so each
//             parent type is normalised on its own and a child's assignments
//             sum to J. Its stride-2 layout (one k x k patch image with
//             (k-1)^2 padding, whose sum at stride 2 adds neighbouring
//             children's terms) is not reproduced: here the sum is exactly over
//             the windows that contain the child.
// Initial assignments: paper R^0 = 1 / (n_c J) with n_c the windows containing
// c (the paper's uniform R over the parents a child feeds); official R^0 = 1/J
// per (window, type), the official code's softmax of zeros over output types.
// A child no window covers ((H - K) not divisible by the stride) feeds nobody
// and its activation gets no gradient.
// With K = H = W (one window) the paper mode of the scalar variant is the
// dense scalar em_routing, bit for bit: the same M-step kernel and the same
// E-step arithmetic in the same order.
// The kernels run on the calling thread and sum every output in a fixed order
// (a child's terms in window order), so results do not depend on threads; a
// caller may split batch items over threads (no two items share a child).
#pragma once
#include <vector>

#include "kernels/conv_votes.h"
#include "kernels/em_routing.h"

namespace vg {

// Over which parents a child's assignments are normalised (see above).
enum class ConvEmNorm { paper, official };

// The dense routing's options (iterations, lambda and its schedule, eps, the
// variance floor, the gradient scheme, cost normalisation by I = kh kw Ci),
// plus the normalisation of the E-step.
struct ConvEmConfig : EmConfig {
  ConvEmNorm norm = ConvEmNorm::paper;
};

// Buffers of one forward pass, kept for backward; resize() sizes them once per
// batch shape, so forward and backward allocate nothing.
struct ConvEmState {
  // The per-window routing state, windows as the items: P = B Ho Wo items of
  // I children x J types (log_a_in holds the gathered log a of each window's
  // children, log_r the assignments R_{c,(p,j)} at [p][q][j]). Its `frozen`
  // flag works as in em_routing.h (one M-step, no E-step: tests only).
  EmState em;
  std::vector<float> log_a_child;  // B x H x W x Ci   log sigmoid of the input logits
  std::vector<float> e_buf;        // the SIMD E-steps' per-child rows of one batch item
  // Full backward scratch, per batch item (see conv_em_backward_full_f32__scalar).
  mutable std::vector<float> scratch;

  // Also sizes the full scheme's history and scratch when cfg.grad is full.
  void resize(const ConvVotesShape& s, const ConvEmConfig& cfg);
  // Grows (never shrinks) the history and scratch for the full scheme.
  void reserve_full(const ConvVotesShape& s, int iters);
  // Bytes its buffers hold (their capacity).
  size_t bytes() const {
    return em.bytes() + (log_a_child.capacity() + e_buf.capacity() + scratch.capacity()) * sizeof(float);
  }
  // The floats resize(s, cfg) allocates (a memory check before any is).
  static size_t floats(const ConvVotesShape& s, const ConvEmConfig& cfg);
};

// Windows along one axis containing input row (or column) y: [*lo, *hi], empty
// when *lo > *hi. k: window size, st: stride, n_out: windows along the axis.
inline void conv_em_windows_of(int y, int k, int st, int n_out, int* lo, int* hi) {
  *lo = y < k ? 0 : (y - k) / st + 1;
  *hi = y / st < n_out - 1 ? y / st : n_out - 1;
}

// Where child q of window (oy, ox) sits on its item's child grid (H x W x Ci).
inline size_t conv_em_child_of(const ConvVotesShape& s, int oy, int ox, int q) {
  const int ci = q % s.Ci, kx = (q / s.Ci) % s.kw(), ky = q / (s.Ci * s.kw());
  return (size_t(oy * s.step() + ky) * s.W + (ox * s.step() + kx)) * s.Ci + ci;
}
// The same walk without its divisions, for the hot loops: f(q0, c0) for each
// kernel position (ky, kx) of window (oy, ox) in order, whose Ci children
// q0 .. q0 + Ci - 1 sit at c0 .. c0 + Ci - 1 on the child grid.
template <class F>
inline void conv_em_window_runs(const ConvVotesShape& s, int oy, int ox, F f) {
  for (int ky = 0, q0 = 0; ky < s.kh(); ++ky)
    for (int kx = 0; kx < s.kw(); ++kx, q0 += s.Ci)
      f(q0, (size_t(oy * s.step() + ky) * s.W + (ox * s.step() + kx)) * s.Ci);
}

// The full backward's last step for one batch item, shared by every ISA's (it
// runs once an item, off the hot loops): each child's adjoint of log a summed
// over the windows holding it, in window order (dla: Ho Wo x I), then through
// log sigmoid: da_in_logit_c += dla_c (1 - a_c), 1 - a_c = -expm1(log a_c).
// scratch: H x W x Ci floats.
void conv_em_input_logit_backward(float* da_in_logit, float* scratch, const float* dla, const float* log_a,
                                  const ConvVotesShape& s);

// E-step: log p_{pqj} = -1/2 sum_h ((V_pqjh - mu_pjh)^2 / sigma2_pjh + log(2 pi sigma2_pjh)),
//   log R_{pqj} = log p_{pqj} + log a_pj - LSE over the child's parents (norm),
// reading st.em's sigma2 and log_a_out (of the last M-step), writing st.em.log_r.
// The first part is the dense family's likelihoods (em_likelihoods_f32__<isa>,
// the same bits). lse_out, unless nullptr, gets each child's LSE, the float
// its entries lose: B x H x W x Ci (paper) or B x H x W x Ci x J (official;
// -inf for a child no window covers).
using ConvEmEStepFn = void (*)(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s,
                               ConvEmNorm norm, float* lse_out);
// One routing iteration: the M-step (with cfg, em_step_config's of that
// iteration) and, when e_step, the E-step; the SIMD variants form each
// window's log-likelihoods right after its M-step. The same outputs as the
// separate steps, bit for bit. descending: the SIMD variants take the
// windows last to first, which changes no output (each window's M-step and
// likelihoods are its own; the E-step's sums over windows keep window order):
// conv_em_routing_forward alternates the order so that an iteration starts
// on the votes the last one (or the votes kernel) left in L2.
using ConvEmMEStepFn = void (*)(float* mu, float* a_out, ConvEmState& st, const float* V, const float* beta_a,
                                const float* beta_v, const ConvVotesShape& s, const EmConfig& cfg, bool e_step,
                                ConvEmNorm norm, float* lse_out, bool descending);
// Full backward through every iteration (cfg as given to the forward, which
// must have had cfg.grad == full); adds into dV, da_in_logit (B x H x W x Ci),
// dbeta_a, dbeta_v. Formulas beside the code in conv_em_routing_scalar.cpp.
// Each M-step's backward, per (item, iteration from the last down, window),
// adds one term per parent type to the betas' gradients: at dbeta_a +
// n dbeta_step (likewise dbeta_v) for the n-th of them. dbeta_step 0 adds
// every term in place. Co gives each M-step a row of its own (B iters Ho Wo
// rows; filled with -0.f, to which adding a term gives the term exactly):
// the rows, added in order into the gradients, add the same terms in the
// same order, so a caller may route items apart and keep the sums' bits.
using ConvEmBackwardFullFn = void (*)(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,
                                      size_t dbeta_step, const float* dmu, const float* da_out, const float* V,
                                      const ConvEmState& st, const ConvVotesShape& s,
                                      const ConvEmConfig& cfg);

// The E-step, the fused iteration and the full backward of one ISA,
// conv_em_<kernel>_f32__<isa> (contracts above).
#define VG_CEM_KERNELS(isa)                                                                             \
  void conv_em_e_step_f32__##isa(ConvEmState& st, const float* V, const float* mu, const ConvVotesShape& s, \
                                 ConvEmNorm norm, float* lse_out);                                         \
  void conv_em_m_e_step_f32__##isa(float* mu, float* a_out, ConvEmState& st, const float* V,                \
                                   const float* beta_a, const float* beta_v, const ConvVotesShape& s,      \
                                   const EmConfig& cfg, bool e_step, ConvEmNorm norm, float* lse_out,      \
                                   bool descending);                                                       \
  void conv_em_backward_full_f32__##isa(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v,       \
                                        size_t dbeta_step, const float* dmu, const float* da_out,             \
                                        const float* V, const ConvEmState& st, const ConvVotesShape& s,       \
                                        const ConvEmConfig& cfg);
VG_CEM_KERNELS(scalar)
// ISA variants (same contracts; only the E-step's rounding differs from the
// scalar reference, the full backward gives its bits); each exists only in
// builds for its architecture.
#if defined(__x86_64__)
VG_CEM_KERNELS(avx2)
VG_CEM_KERNELS(avx512)
#endif
#if defined(__aarch64__)
VG_CEM_KERNELS(neon)
#endif
#undef VG_CEM_KERNELS

// One variant: the M-step, its weights, the likelihoods and the stop-gradient
// backward are the dense family's kernels of the same ISA (a window's M-step
// is the dense M-step), the E-step and the full backward this family's.
struct ConvEmRoutingKernels {
  Isa isa;
  EmMStepFn m_step;
  EmMWeightsFn m_weights;
  EmLikelihoodsFn likelihoods;
  ConvEmEStepFn e_step;
  ConvEmMEStepFn m_e_step;
  EmBackwardFn backward;
  ConvEmBackwardFullFn backward_full;
};

const ConvEmRoutingKernels* conv_em_routing_variants(int* count);
const ConvEmRoutingKernels* conv_em_routing_for(Isa isa);
const ConvEmRoutingKernels& conv_em_routing_kernels();

// FLOPs, counted as the dense routing's with the P = B Ho Wo windows as the
// batch: the cross-window normalisation does per (window, child, type) what
// the dense softmax does per (child, type) (a max, an exp, a sum, a
// subtraction), gathered across windows instead of along a row.
inline double conv_em_routing_forward_flops(const ConvVotesShape& s, int iters) {
  return em_routing_forward_flops(s.B * s.Ho() * s.Wo(), s.I(), s.Co, iters);
}
// A replay (ConvEmRecord): each iteration's weights, 3 per (window, child,
// type), and each E-step's likelihoods less their child's LSE, 3 per pose
// element and 3 per (window, child, type).
inline double conv_em_routing_replay_flops(const ConvVotesShape& s, int iters) {
  const double pairs = double(s.B) * s.Ho() * s.Wo() * s.I() * s.Co;
  return 3.0 * iters * pairs + (iters - 1) * pairs * (3.0 * kPoseDim + 3);
}
inline double conv_em_routing_backward_flops(const ConvVotesShape& s) {
  return em_routing_backward_flops(s.B * s.Ho() * s.Wo(), s.I(), s.Co);
}
inline double conv_em_routing_backward_full_flops(const ConvVotesShape& s, int iters) {
  return em_routing_backward_full_flops(s.B * s.Ho() * s.Wo(), s.I(), s.Co, iters);
}

// What the full backward's history is rebuilt from: every M-step's outputs,
// mu, sigma2 (clamped), sum_h log sigma2, a and log a, each block t-major,
// iters P J (2 x 16 + 3) floats (P = B Ho Wo), then every E-step's per-child
// LSE (lse_out above), iters - 1 blocks of B H W Ci [x J]: a fifth of the
// history at the paper's ConvCaps1. The rest is formed again by the routing's
// own arithmetic, a window at a time while its votes are in cache: each log R
// after the first as the likelihoods (from the recorded moments) less their
// child's recorded LSE, each iteration's weights (m_weights) from its log R.
// No M-step runs, and no E-step's normalisation.
// A forward with cfg.grad == full given `record` writes one and keeps no
// history; a forward given `replay`, the record of a forward of the same
// inputs and configuration, leaves mu, a_out and the history as a forward
// without a record would have, bit for bit (the rest of st.em is not
// restored).
struct ConvEmRecord {
  float* record = nullptr;
  const float* replay = nullptr;
  // Floats of one LSE block (one E-step's).
  static size_t lse_floats(const ConvVotesShape& s, ConvEmNorm norm) {
    return size_t(s.B) * s.H * s.W * s.Ci * (norm == ConvEmNorm::paper ? 1 : s.Co);
  }
  static size_t floats(const ConvVotesShape& s, int iters, ConvEmNorm norm) {
    return size_t(iters) * s.B * s.Ho() * s.Wo() * s.Co * (2 * kPoseDim + 3) + size_t(iters - 1) * lse_floats(s, norm);
  }
};

// The whole routing: initial R (see above), then cfg.iters M-steps with an
// E-step between consecutive ones; iteration t uses em_lambda(cfg, t). With
// cfg.grad == full every iteration's state is kept for the full backward.
// Throws std::invalid_argument for an invalid shape, Co > 64, iters < 1, both
// a record and a replay, or either without cfg.grad == full.
void conv_em_routing_forward(float* mu, float* a_out, ConvEmState& st, const float* V,
                             const float* a_in_logit, const float* beta_a, const float* beta_v,
                             const ConvVotesShape& s, const ConvEmConfig& cfg,
                             const ConvEmRoutingKernels& k = conv_em_routing_kernels(), ConvEmRecord rec = {});
// Accumulates into dV, dbeta_a, dbeta_v and, with EmGrad::full, da_in_logit
// (B x H x W x Ci; required then). EmGrad::stopgrad: the last M-step with R,
// S = sum R a and the mu inside sigma2 detached, per window exactly the dense
// stop-gradient backward; da_in_logit may be nullptr and is never written.
// dbeta_step: as ConvEmBackwardFullFn's (EmGrad::full only; 0 otherwise).
void conv_em_routing_backward(float* dV, float* da_in_logit, float* dbeta_a, float* dbeta_v, size_t dbeta_step,
                              const float* dmu, const float* da_out, const float* V, const float* mu,
                              const float* a_out, const ConvEmState& st, const ConvVotesShape& s,
                              const ConvEmConfig& cfg,
                              const ConvEmRoutingKernels& k = conv_em_routing_kernels());

}  // namespace vg
