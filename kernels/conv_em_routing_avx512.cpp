// AVX-512 E-step and full backward of EM routing over convolutional windows
// (built with -mavx512f -mavx512vl -mavx512dq -mfma): conv_em_routing_simd.h and
// em_backward_full_simd.h over the primitives of em_routing_avx512.h.
#include "kernels/em_routing_avx512.h"
#include "kernels/em_routing_simd.h"
#include "kernels/em_backward_full_simd.h"
#include "kernels/conv_em_routing_simd.h"

VG_CEM_DEFINE(avx512)
