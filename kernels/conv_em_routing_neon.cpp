// NEON E-step of EM routing over convolutional windows (AArch64 Advanced SIMD, no extra flags):
// conv_em_routing_simd.h over the primitives of em_routing_neon.h.
#include "kernels/em_routing_neon.h"
#include "kernels/em_routing_simd.h"
#include "kernels/conv_em_routing_simd.h"

VG_CEM_DEFINE(neon)
