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

bool isa_supported(Isa isa) {
  switch (isa) {
    case Isa::scalar: return true;
    // SIMD variants are added kernel family by kernel family; until a family
    // has one, only the scalar reference is offered.
    default: return false;
  }
}

Isa best_isa() {
  for (Isa i : {Isa::avx512, Isa::avx2, Isa::neon})
    if (isa_supported(i)) return i;
  return Isa::scalar;
}

Isa selected_isa() {
  const char* env = std::getenv("VIEWGAP_ISA");
  if (env == nullptr || *env == '\0') return best_isa();
  const Isa isa = parse_isa(env);
  if (!isa_supported(isa))
    throw std::invalid_argument(std::string("VIEWGAP_ISA: '") + env +
                                "' is not supported by this CPU or build");
  return isa;
}

}  // namespace vg
