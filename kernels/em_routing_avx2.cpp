// AVX2 + FMA EM-routing steps: em_routing_simd.h over the primitives of
// em_routing_avx2.h (built with -mavx2 -mfma).
#include "kernels/em_routing_avx2.h"
#include "kernels/em_routing_simd.h"

VG_EM_DEFINE(avx2)
