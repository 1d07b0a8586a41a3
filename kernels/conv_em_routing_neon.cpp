// NEON E-step and full backward of EM routing over convolutional windows
// (AArch64 Advanced SIMD, no extra flags): conv_em_routing_simd.h and
// em_backward_full_simd.h over the primitives of em_routing_neon.h.
#include "kernels/em_routing_neon.h"
#include "kernels/em_routing_simd.h"
#include "kernels/em_backward_full_simd.h"
#include "kernels/conv_em_routing_simd.h"

VG_CEM_DEFINE(neon)
