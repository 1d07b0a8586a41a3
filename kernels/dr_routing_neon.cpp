// NEON dynamic-routing kernels (AArch64 Advanced SIMD, no extra flags): a 16-D
// capsule vector is four q registers.
#include "kernels/vec_neon.h"

#include "kernels/dr_routing_simd.h"

VG_DR_DEFINE(neon)
