// The E-step's quadratic forms eight at a time (scaled_dots16x8 in each ISA's
// em_routing_<isa>.h), exported per ISA so that a test can hold the
// transposed sum to the ISA's own dot16, bit for bit: the E-step uses one or
// the other by position (eight parents at a time, the rest one by one), and
// a routing's bits must not depend on which.
#pragma once

namespace vg {

// out[k] = c dot16(a + 16 k, b + 16 k) + add[k] for k < 8: transposed
// (scaled_dots16x8) or one by one (dot16, as the E-step's leftover parents).
// Call only where isa_supported(the ISA).
// And out[k] = pair_sum16(t + 16 k), the full backward's sums of 16 (also
// eight at a time there), transposed (pair_sums16x8) or one by one.
// And each row's max (std::max_element's) and sum in j order added into
// sums[r], of x (rows x J): the routing's per-child bookkeeping (row_maxes,
// add_row_sums), a register of rows at a time where J allows.
#define VG_EM_DOTS(isa)                                                                          \
  void em_dots16x8_f32__##isa(const float* a, const float* b, float c, const float* add, float* out, \
                              bool transposed);                                                     \
  void em_pair_sums16x8_f32__##isa(const float* t, float* out, bool transposed);                         \
  void em_row_folds_f32__##isa(float* maxes, float* sums, const float* x, int rows, int J);
#if defined(__x86_64__)
VG_EM_DOTS(avx2)
VG_EM_DOTS(avx512)
#endif
#if defined(__aarch64__)
VG_EM_DOTS(neon)
#endif
#undef VG_EM_DOTS

}  // namespace vg
