// Instruction-set selection for the hand-written kernels. One binary runs on
// any CPU of its architecture: the best variant is picked at start-up, and
// VIEWGAP_ISA=scalar|avx2|avx512|neon forces one.
#pragma once
#include <string>

namespace vg {

enum class Isa { scalar, avx2, avx512, neon };

const char* isa_name(Isa isa);
bool isa_supported(Isa isa);  // by this build and this CPU
Isa best_isa();               // best supported
// The ISA the kernels use: VIEWGAP_ISA if set, else best_isa(). Throws
// std::invalid_argument naming the value if it is unknown or unsupported.
Isa selected_isa();
// Parses "scalar", "avx2", ...; throws std::invalid_argument otherwise.
Isa parse_isa(const std::string& name);

// What this CPU lacks for `isa`, e.g. "AVX2, FMA" ("" if it has everything;
// "x86-64" on another architecture for the x86 ISAs).
std::string isa_missing_features(Isa isa);
// Makes selected_isa() return `isa` whatever VIEWGAP_ISA says (--reproducible).
// Call it before the first kernel runs: each family picks its variant once.
void pin_isa(Isa isa);

}  // namespace vg
