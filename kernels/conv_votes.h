// The votes of a convolutional matrix-capsule layer (Hinton, Sabour & Frosst
// 2018): every child pose in a parent's window times one 4x4 transformation
// per (kernel position, child type, parent type), shared over positions.
// Row-major float32, a 4x4 pose is 16 floats row-major:
//   M  B x H x W x Ci x 16                  child poses
//   W  K x K x Ci x Co x 16                 (per_kernel_position)
//      Ci x Co x 16                         (shared: the class-capsule form)
//   V  B x Ho x Wo x (kh kw Ci) x Co x 16   votes; one parent position's
//                                           I = kh kw Ci children x J = Co
//                                           parent types are contiguous, the
//                                           block EM routing reads per window
// V[b,oy,ox,(ky kw + kx) Ci + i,o] = M[b, oy s + ky, ox s + kx, i] W[ky,kx,i,o]
// (W[i,o] when shared), VALID padding: Ho = (H - K) / s + 1. The class form is
// one window covering the whole input (kh = H, kw = W, Ho = Wo = 1), so its
// votes are B x (H W Ci) x Co x 16.
// One scalar reference; ISA variants plug into the same signatures.
#pragma once
#include <cstddef>

#include "kernels/isa.h"

namespace vg {

// Which weights a child's votes use.
//   per_kernel_position  W[ky,kx,i,o]: ConvCaps, K x K windows with stride s
//   shared               W[i,o] for every position of child type i: ClassCaps
enum class VoteWeights { per_kernel_position, shared };

struct ConvVotesShape {
  int B = 1, H = 1, W = 1;  // batch, input grid
  int Ci = 1, Co = 1;       // child and parent capsule types
  int K = 1, stride = 1;    // window and stride (ignored when shared)
  VoteWeights weights = VoteWeights::per_kernel_position;

  static ConvVotesShape conv(int B, int H, int W, int Ci, int Co, int K, int stride) {
    return {B, H, W, Ci, Co, K, stride, VoteWeights::per_kernel_position};
  }
  static ConvVotesShape class_caps(int B, int H, int W, int Ci, int Co) {
    return {B, H, W, Ci, Co, 1, 1, VoteWeights::shared};
  }
  bool shared() const { return weights == VoteWeights::shared; }
  int kh() const { return shared() ? H : K; }  // window rows
  int kw() const { return shared() ? W : K; }  // window columns
  int step() const { return shared() ? 1 : stride; }
  int Ho() const { return (H - kh()) / step() + 1; }
  int Wo() const { return (W - kw()) / step() + 1; }
  int I() const { return kh() * kw() * Ci; }  // children per window
  // Distinct weight rows (one per kernel position and child type).
  int weight_rows() const { return (shared() ? 1 : K * K) * Ci; }
  // Every size >= 1 and the window inside the input.
  bool valid() const {
    return B >= 1 && H >= 1 && W >= 1 && Ci >= 1 && Co >= 1 &&
           (shared() || (K >= 1 && stride >= 1 && K <= H && K <= W));
  }
  size_t m_size() const { return size_t(B) * H * W * Ci * 16; }
  size_t w_size() const { return size_t(weight_rows()) * Co * 16; }
  size_t v_size() const { return size_t(B) * Ho() * Wo() * I() * Co * 16; }
};

// Where coordinate addition puts a child's scaled (row, column):
//   paper     elements (0,3) and (1,3), the first two of the right-hand column
//             (flat 3 and 7), as the paper describes
//   official  the column to flat element 0 and the row to element 1, as
//             google-research's capsule_em code does (its position grid starts
//             as (row, column), and each of its three conv_pos calls, conv1's
//             and the two convolutional capsule layers', swaps the pair)
enum class CoordPlace { paper, official };

// Coordinate addition: every vote of the child at input position (y, x) gets
// row[y] added to one element and col[x] to another. The caller chooses the
// scaling (e.g. the centre of the child's receptive field over the image
// size); the kernel only adds. Constants: they change neither dM nor dW.
struct VoteCoords {
  const float* row = nullptr;  // H values
  const float* col = nullptr;  // W values
  CoordPlace place = CoordPlace::paper;
  int row_elem() const { return place == CoordPlace::paper ? 3 : 1; }
  int col_elem() const { return place == CoordPlace::paper ? 7 : 0; }
};

// The kernels assume s.valid() (the caller checks shapes once, not per call)
// and allocate nothing; the SIMD backward packs W on the stack (64 KB).
// V = the votes (overwrites V); with coords not null, plus the coordinates.
using ConvVotesFn = void (*)(float* V, const float* M, const float* W, const VoteCoords* coords,
                             const ConvVotesShape& s);
// Given dV (V's layout), ADDS INTO dM and dW (the caller zeroes them once per
// step): dM[b,y,x,i] += sum over every (window, kernel position) that used the
// child of dV W^T; dW[ky,kx,i,o] += sum over b, oy, ox of M^T dV.
using ConvVotesBackwardFn = void (*)(float* dM, float* dW, const float* dV, const float* M, const float* W,
                                     const ConvVotesShape& s);

#define VG_CV_KERNELS(isa)                                                                                \
  void conv_votes_forward_f32__##isa(float* V, const float* M, const float* W, const VoteCoords* coords,  \
                                     const ConvVotesShape& s);                                            \
  void conv_votes_backward_f32__##isa(float* dM, float* dW, const float* dV, const float* M, const float* W, \
                                      const ConvVotesShape& s);
VG_CV_KERNELS(scalar)
// ISA variants; each exists only in builds for its architecture.
#if defined(__x86_64__)
VG_CV_KERNELS(avx2)
VG_CV_KERNELS(avx512)
#endif
#if defined(__aarch64__)
VG_CV_KERNELS(neon)
#endif
#undef VG_CV_KERNELS

struct ConvVotesKernels {
  Isa isa;
  ConvVotesFn forward;
  ConvVotesBackwardFn backward;
};

// Every variant this build has (tests and benchmarks iterate over it).
const ConvVotesKernels* conv_votes_variants(int* count);
// The variant for `isa`, or nullptr if this build has none.
const ConvVotesKernels* conv_votes_for(Isa isa);
// The variant chosen at start-up (selected_isa(), falling back to scalar).
const ConvVotesKernels& conv_votes_kernels();

// FLOPs counted from the scalar loops: 64 multiply-adds per vote (plus the two
// coordinate additions); backward twice the products (dM and dW).
inline double conv_votes_forward_flops(const ConvVotesShape& s, bool coords = false) {
  return double(s.v_size()) / 16 * (128.0 + (coords ? 2 : 0));
}
inline double conv_votes_backward_flops(const ConvVotesShape& s) { return double(s.v_size()) / 16 * 256.0; }

}  // namespace vg
