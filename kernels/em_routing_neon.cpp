// NEON EM-routing steps: em_routing_simd.h over the primitives of
// em_routing_neon.h (no extra flags).
#include "kernels/em_routing_neon.h"
#include "kernels/em_routing_simd.h"

VG_EM_DEFINE(neon)
