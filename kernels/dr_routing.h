// Dynamic routing between vector capsules (Sabour, Frosst & Hinton 2017).
// Input capsules u_i are 8-D, output capsules v_j 16-D:
//   u      B x I x 8              lower capsules (already squashed)
//   W      I x J x 8 x 16         W[i,j,k,:] = column k of the 16x8 matrix W_ij
//                                 (stored k-major so a prediction is 8
//                                 broadcast multiply-adds of 16-float rows)
//   uhat   B x I x J x 16         predictions u_hat_{j|i} = W_ij u_i
//   logits B x I x J              routing logits b_ij;  c = softmax over j
//   s, v   B x J x 16             s_j = sum_i c_ij u_hat_{j|i};  v_j = squash(s_j)
// The kernels (one scalar reference, SIMD variants with the same contracts,
// J <= 64): the predictions, forward and backward; the combination (softmax
// over j, then the c-weighted sum over i) and the agreement (b_ij += u_hat . v_j),
// forward and backward. The squash and the iteration loop are here too, shared
// by every variant (a few hundred flops per item, under 5% of routing).
#pragma once
#include <vector>

#include "kernels/isa.h"

namespace vg {

inline constexpr int kDrInDim = 8;    // primary capsule dimension
inline constexpr int kDrOutDim = 16;  // class capsule dimension

// uhat[b,i,j,:] = sum_k u[b,i,k] W[i,j,k,:] (overwrites uhat).
using DrPredictFn = void (*)(float* uhat, const float* u, const float* W, int B, int I, int J);
// du[b,i,k] += sum_j W[i,j,k,:] . duhat[b,i,j,:];  dW[i,j,k,:] += sum_b u[b,i,k] duhat[b,i,j,:].
using DrPredictBackwardFn = void (*)(float* du, float* dW, const float* duhat, const float* u,
                                     const float* W, int B, int I, int J);
// c[b,i,:] = softmax_j(logits[b,i,:]) (shifted by the row's max);
// s[b,j,:] = sum_i c[b,i,j] uhat[b,i,j,:]. Overwrites c and s.
using DrCombineFn = void (*)(float* s, float* c, const float* logits, const float* uhat, int B, int I,
                             int J);
// Backward of DrCombineFn given ds: duhat[b,i,j,:] += c_ij ds_j (always) and,
// when dlogits is not null, with dc_ij = uhat_ij . ds_j the softmax's
// dlogits_ij += c_ij (dc_ij - sum_k c_ik dc_ik).
using DrCombineBackwardFn = void (*)(float* duhat, float* dlogits, const float* ds, const float* c,
                                     const float* uhat, int B, int I, int J);
// logits_out[b,i,j] = logits_in[b,i,j] + uhat[b,i,j,:] . v[b,j,:] (may alias).
using DrAgreeFn = void (*)(float* logits_out, const float* logits_in, const float* uhat, const float* v,
                           int B, int I, int J);
// Backward of DrAgreeFn given dlogits (the gradient of logits_out):
// dv[b,j,:] += sum_i dlogits_ij uhat_ij;  duhat[b,i,j,:] += dlogits_ij v_j.
// (logits_in's gradient is dlogits itself: the caller keeps it.)
using DrAgreeBackwardFn = void (*)(float* dv, float* duhat, const float* dlogits, const float* uhat,
                                   const float* v, int B, int I, int J);

#define VG_DR_KERNELS(isa)                                                                              \
  void dr_predict_f32__##isa(float* uhat, const float* u, const float* W, int B, int I, int J);          \
  void dr_predict_backward_f32__##isa(float* du, float* dW, const float* duhat, const float* u,         \
                                      const float* W, int B, int I, int J);                             \
  void dr_combine_f32__##isa(float* s, float* c, const float* logits, const float* uhat, int B, int I,  \
                             int J);                                                                    \
  void dr_combine_backward_f32__##isa(float* duhat, float* dlogits, const float* ds, const float* c,    \
                                      const float* uhat, int B, int I, int J);                          \
  void dr_agree_f32__##isa(float* logits_out, const float* logits_in, const float* uhat, const float* v, \
                           int B, int I, int J);                                                        \
  void dr_agree_backward_f32__##isa(float* dv, float* duhat, const float* dlogits, const float* uhat,    \
                                    const float* v, int B, int I, int J);
VG_DR_KERNELS(scalar)
// ISA variants; each exists only in builds for its architecture.
#if defined(__x86_64__)
VG_DR_KERNELS(avx2)
VG_DR_KERNELS(avx512)
#endif
#if defined(__aarch64__)
VG_DR_KERNELS(neon)
#endif
#undef VG_DR_KERNELS

struct DrRoutingKernels {
  Isa isa;
  DrPredictFn predict;
  DrPredictBackwardFn predict_backward;
  DrCombineFn combine;
  DrCombineBackwardFn combine_backward;
  DrAgreeFn agree;
  DrAgreeBackwardFn agree_backward;
};

// Every variant this build has (tests and benchmarks iterate over it).
const DrRoutingKernels* dr_routing_variants(int* count);
// The variant for `isa`, or nullptr if this build has none.
const DrRoutingKernels* dr_routing_for(Isa isa);
// The variant chosen at start-up (selected_isa(), falling back to scalar).
const DrRoutingKernels& dr_routing_kernels();

// squash(s) = |s|^2 / (1 + |s|^2) s / |s| = s |s| / (1 + |s|^2), for n vectors
// of `dim` floats (v may alias s). squash(0) = 0, and |squash(s)| < 1 (<= 1
// in float). Finite for |s| up to ~1.8e19, where |s|^2 overflows (then NaN).
void dr_squash_forward(float* v, const float* s, size_t n, int dim);
// ds = J^T dv with J = scale I + n scale'(n) u u^T (u = s/|s|, scale = n/(1+n^2),
// scale' = (1-n^2)/(1+n^2)^2), written without dividing by |s| beyond forming
// u, so it is finite at any norm and 0 at s = 0 (overwrites ds).
void dr_squash_backward(float* ds, const float* dv, const float* s, size_t n, int dim);

// Which derivative dr_routing_backward computes.
//   full      through every iteration (the softmax and the agreements), as in the paper
//   stopgrad  the coupling coefficients c of every iteration held constant: only
//             the last combination s_j = sum_i c_ij u_hat_{j|i} passes a gradient
enum class DrGrad { full, stopgrad };

// What one forward keeps for backward, per iteration r = 0 .. iters-1 (t-major).
struct DrState {
  std::vector<float> logits;  // iters x B x I x J   b used by iteration r (r = 0: zeros)
  std::vector<float> c;       // iters x B x I x J   softmax_j(b)
  std::vector<float> s;       // iters x B x J x 16  before the squash
  std::vector<float> v;       // iters x B x J x 16  after
  // The stop-gradient backward is the exact gradient of the last combination
  // with c held fixed. Frozen, forward reruns only that combination from the
  // stored last logits (same c), so finite differences can check it (tests).
  bool frozen = false;
  // Backward scratch.
  std::vector<float> dlogits, dlogits_next, dv, ds;
  void resize(int B, int I, int J, int iters);
  int iters = 0, B = 0, I = 0, J = 0;
};

// The routing: iters combinations, with an agreement between consecutive ones.
// Writes v (B x J x 16, the last iteration's) and len (B x J): |v_j|, computed
// as |s|^2 / (1 + |s|^2) from s (no square root of a rounded v).
void dr_routing_forward(float* v, float* len, DrState& st, const float* uhat, int B, int I, int J,
                        int iters, const DrRoutingKernels& k = dr_routing_kernels());
// Accumulates into duhat the gradient of v (dv, may be nullptr) and of len
// (dlen, may be nullptr). With DrGrad::full through every iteration.
void dr_routing_backward(float* duhat, const float* dv, const float* dlen, const float* uhat,
                         DrState& st, int B, int I, int J, int iters, DrGrad grad,
                         const DrRoutingKernels& k = dr_routing_kernels());

// FLOPs counted from the scalar loops (exp and division as one).
inline double dr_predict_flops(int B, int I, int J) { return 2.0 * B * I * J * kDrInDim * kDrOutDim; }
inline double dr_combine_flops(int B, int I, int J) {
  return double(B) * I * J * (4 + 2.0 * kDrOutDim);  // softmax (max, sub, exp, sum, div) + weighted sum
}
inline double dr_combine_backward_flops(int B, int I, int J, bool logits) {
  return double(B) * I * J * (2.0 * kDrOutDim + (logits ? 2.0 * kDrOutDim + 5 : 0));
}
inline double dr_agree_flops(int B, int I, int J) { return double(B) * I * J * (2.0 * kDrOutDim + 1); }
inline double dr_agree_backward_flops(int B, int I, int J) { return 4.0 * B * I * J * kDrOutDim; }
inline double dr_squash_flops(size_t n, int dim) { return double(n) * (3.0 * dim + 4); }
inline double dr_squash_backward_flops(size_t n, int dim) { return double(n) * (7.0 * dim + 10); }
inline double dr_routing_forward_flops(int B, int I, int J, int iters) {
  return iters * (dr_combine_flops(B, I, J) + dr_squash_flops(size_t(B) * J, kDrOutDim)) +
         (iters - 1) * dr_agree_flops(B, I, J) + 3.0 * B * J;  // + the lengths
}
inline double dr_routing_backward_flops(int B, int I, int J, int iters, DrGrad grad) {
  // The last iteration: lengths' and squash's backward, the combination's
  // gradient to u_hat. With full, every earlier iteration too: the agreement's
  // backward, the squash's, and the combination's with its softmax (iteration
  // 0's logits are constant zeros, so its softmax backward is skipped).
  const double lengths = 4.0 * B * J * kDrOutDim, squash = dr_squash_backward_flops(size_t(B) * J, kDrOutDim);
  const double last = lengths + squash + dr_combine_backward_flops(B, I, J, iters > 1 && grad == DrGrad::full);
  if (grad == DrGrad::stopgrad || iters == 1) return last;
  return last + (iters - 1) * (dr_agree_backward_flops(B, I, J) + squash) +
         (iters - 2) * dr_combine_backward_flops(B, I, J, true) + dr_combine_backward_flops(B, I, J, false);
}

}  // namespace vg
