#include "kernels/fma_probe.h"

#include <algorithm>
#include <chrono>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif


namespace vg {

namespace {
using Clock = std::chrono::steady_clock;

// 12 independent accumulators cover FMA latency x throughput (4 cycles x 2 per
// cycle on current cores) with room to spare. Each returns FLOPs done.
#if defined(__x86_64__)
__attribute__((target("avx512f"))) double chains_avx512(long iters, float* sink) {
  __m512 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm512_set1_ps(1.f + 1e-3f * k);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) a[k] = _mm512_fmadd_ps(a[k], m, c);
  __m512 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm512_add_ps(s, a[k]);
  float out[16];
  _mm512_storeu_ps(out, s);
  *sink = out[0];
  return double(iters) * 12 * 16 * 2;
}
__attribute__((target("avx2,fma"))) double chains_avx2(long iters, float* sink) {
  __m256 a[12];
  for (int k = 0; k < 12; ++k) a[k] = _mm256_set1_ps(1.f + 1e-3f * k);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) a[k] = _mm256_fmadd_ps(a[k], m, c);
  float out[8];
  __m256 s = a[0];
  for (int k = 1; k < 12; ++k) s = _mm256_add_ps(s, a[k]);
  _mm256_storeu_ps(out, s);
  *sink = out[0];
  return double(iters) * 12 * 8 * 2;
}
#elif defined(__aarch64__)
double chains_neon(long iters, float* sink) {
  float32x4_t a[12];
  for (int k = 0; k < 12; ++k) a[k] = vdupq_n_f32(1.f + 1e-3f * k);
  const float32x4_t m = vdupq_n_f32(0.999999f), c = vdupq_n_f32(1e-7f);
  for (long i = 0; i < iters; ++i)
#pragma GCC unroll 12
    for (int k = 0; k < 12; ++k) a[k] = vfmaq_f32(c, a[k], m);
  float32x4_t s = a[0];
  for (int k = 1; k < 12; ++k) s = vaddq_f32(s, a[k]);
  *sink = vgetq_lane_f32(s, 0);
  return double(iters) * 12 * 4 * 2;
}
#endif

double chains_scalar(long iters, float* sink) {
  float a[12];
  for (int k = 0; k < 12; ++k) a[k] = 1.f + 1e-3f * k;
  for (long i = 0; i < iters; ++i)
    for (int k = 0; k < 12; ++k) a[k] = a[k] * 0.999999f + 1e-7f;
  float s = 0;
  for (float x : a) s += x;
  *sink = s;
  return double(iters) * 12 * 2;
}
}  // namespace

double fma_peak_gflops(double seconds) {
  double (*chains)(long, float*) = chains_scalar;
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx512f")) chains = chains_avx512;
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) chains = chains_avx2;
#elif defined(__aarch64__)
  chains = chains_neon;
#endif
  volatile float sink = 0;
  float s = 0;
  chains(100000, &s);  // warm up clocks and caches
  // Best of several short windows: the machine may be shared.
  double best = 0;
  long iters = 1 << 20;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = Clock::now();
    const double flops = chains(iters, &s);
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > 0) best = std::max(best, flops / dt * 1e-9);
    sink = sink + s;
  } while (Clock::now() < end);
  return best;
}

}  // namespace vg
