// NEON EM-routing steps and full backward: em_routing_simd.h and
// em_backward_full_simd.h over the primitives of em_routing_neon.h
// (no extra flags).
#include "kernels/em_routing_neon.h"
#include "kernels/em_routing_simd.h"
#include "kernels/em_backward_full_simd.h"

VG_EM_DEFINE(neon)
VG_EM_FULL_DEFINE(neon)
