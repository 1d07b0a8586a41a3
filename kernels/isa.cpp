#include "kernels/isa.h"

#include <cstdlib>
#include <stdexcept>

namespace vg {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::scalar: return "scalar";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
    case Isa::neon: return "neon";
  }
  return "?";
}

Isa parse_isa(const std::string& name) {
  for (Isa i : {Isa::scalar, Isa::avx2, Isa::avx512, Isa::neon})
    if (name == isa_name(i)) return i;
  throw std::invalid_argument("VIEWGAP_ISA: unknown value '" + name +
                              "' (expected scalar, avx2, avx512 or neon)");
}

// This build has the avx2/avx512 kernels on x86-64 and the NEON ones on
// aarch64 (CMakeLists.txt adds those files per architecture). The CPU check is
// libgcc's CPUID reading, which also checks that the OS saves the ymm/zmm state.
// The AVX-512 files are compiled with -mavx512f -mavx512vl -mavx512dq, so the
// compiler may use all three: all three are required.
bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
#if defined(__x86_64__)
    case Isa::avx2:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case Isa::avx512:
      __builtin_cpu_init();
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("fma");
#endif
#if defined(__aarch64__)
    case Isa::neon: return true;  // Advanced SIMD is mandatory on AArch64
#endif
    default: return false;
  }
}

Isa best_isa() {
  for (Isa i : {Isa::avx512, Isa::avx2, Isa::neon})
    if (isa_supported(i)) return i;
  return Isa::scalar;
}

std::string isa_missing_features(Isa isa) {
  std::string missing;
  [[maybe_unused]] auto need = [&](bool has, const char* name) {  // x86-64 only
    if (!has) missing += (missing.empty() ? "" : ", ") + std::string(name);
  };
  switch (isa) {
    case Isa::scalar: break;
#if defined(__x86_64__)
    case Isa::avx2:
      __builtin_cpu_init();
      need(__builtin_cpu_supports("avx2"), "AVX2");
      need(__builtin_cpu_supports("fma"), "FMA");
      break;
    case Isa::avx512:
      __builtin_cpu_init();
      need(__builtin_cpu_supports("avx512f"), "AVX512F");
      need(__builtin_cpu_supports("avx512vl"), "AVX512VL");
      need(__builtin_cpu_supports("avx512dq"), "AVX512DQ");
      need(__builtin_cpu_supports("fma"), "FMA");
      break;
    case Isa::neon: missing = "AArch64"; break;
#else
    case Isa::avx2:
    case Isa::avx512: missing = "x86-64"; break;
    case Isa::neon: break;
#endif
  }
  return missing;
}

namespace {
bool g_pinned = false;
Isa g_pinned_isa = Isa::scalar;
}  // namespace

void pin_isa(Isa isa) {
  g_pinned = true;
  g_pinned_isa = isa;
}

Isa selected_isa() {
  if (g_pinned) return g_pinned_isa;
  const char* env = std::getenv("VIEWGAP_ISA");
  if (env == nullptr || *env == '\0') return best_isa();
  const Isa isa = parse_isa(env);
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string("VIEWGAP_ISA: '") + env +
                                "' is not supported by this CPU or build");
  return isa;
}

}  // namespace vg
