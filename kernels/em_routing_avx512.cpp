// AVX-512 EM-routing steps and full backward: em_routing_simd.h and
// em_backward_full_simd.h over the primitives of em_routing_avx512.h
// (-mavx512f -mavx512vl -mavx512dq -mfma).
#include "kernels/em_routing_avx512.h"
#include "kernels/em_routing_simd.h"
#include "kernels/em_backward_full_simd.h"

VG_EM_DEFINE(avx512)
VG_EM_FULL_DEFINE(avx512)
