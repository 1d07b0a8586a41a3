// This core's measured single-precision FMA throughput: the ceiling that
// `viewgap profile` reports every layer against.
#pragma once

namespace vg {
// GFLOP/s of independent FMA chains in the widest vector ISA this CPU runs
// (AVX-512, AVX2+FMA, NEON; plain scalar otherwise), measured for ~`seconds`.
double fma_peak_gflops(double seconds = 0.05);
}  // namespace vg
