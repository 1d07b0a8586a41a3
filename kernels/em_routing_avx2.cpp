// AVX2 + FMA EM-routing steps and full backward: em_routing_simd.h and
// em_backward_full_simd.h over the primitives of em_routing_avx2.h
// (built with -mavx2 -mfma).
#include "kernels/em_routing_avx2.h"
#include "kernels/em_routing_simd.h"
#include "kernels/em_backward_full_simd.h"

VG_EM_DEFINE(avx2)
VG_EM_FULL_DEFINE(avx2)
