#include "kernels/conv_votes.h"

namespace vg {

namespace {
// The kernel list: one line per variant this build has.
#define VG_CV_ENTRY(isa) {Isa::isa, conv_votes_forward_f32__##isa, conv_votes_backward_f32__##isa}
const ConvVotesKernels kVariants[] = {
    VG_CV_ENTRY(scalar),
#if defined(__x86_64__)
    VG_CV_ENTRY(avx2),
    VG_CV_ENTRY(avx512),
#endif
#if defined(__aarch64__)
    VG_CV_ENTRY(neon),
#endif
};
#undef VG_CV_ENTRY
}  // namespace

const ConvVotesKernels* conv_votes_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const ConvVotesKernels* conv_votes_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const ConvVotesKernels& conv_votes_kernels() {
  static const ConvVotesKernels& chosen = []() -> const ConvVotesKernels& {
    const ConvVotesKernels* k = conv_votes_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

}  // namespace vg
