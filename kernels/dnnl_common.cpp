#include "kernels/dnnl_common.h"

#include <array>
#include <stdexcept>

namespace vg {

// Created on first use (thread-safe initialisation of function-local statics).
dnnl::engine& dnnl_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// One in-order CPU stream per thread: a stream is cheap, and sweep cells that train
// models on several threads at once then never share one.
dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

}  // namespace vg

namespace vg {

void pin_onednn_isa_avx2() {
  // The API wins over DNNL_MAX_CPU_ISA only if it comes first: once oneDNN has
  // read its ISA (at the first primitive) the call fails, and we say so.
  const dnnl_status_t st = dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
  if (st != dnnl_success)
    throw std::runtime_error("oneDNN refused to cap its ISA at AVX2 (status " +
                             std::to_string(int(st)) + ")");
  if (dnnl::get_effective_cpu_isa() != dnnl::cpu_isa::avx2)
    throw std::runtime_error("oneDNN runs at " + onednn_isa() + ", not AVX2");
}

std::string onednn_isa() {
#if !defined(__x86_64__)
  // dnnl_cpu_isa_t names x86's ISAs only; on aarch64 oneDNN returns its own
  // flags cast to it: asimd in bit 0, SVE at 128, 256, 384 and 512 bits in
  // bits 1 to 4 (under qemu 0x1f, whose x86 name is "avx512_mic_4ops"). The
  // widest flag set names the ISA.
  const auto bits = unsigned(dnnl::get_effective_cpu_isa());
  static constexpr std::array<const char*, 5> names{"asimd", "sve_128", "sve_256", "sve_384", "sve_512"};
  for (int b = int(names.size()) - 1; b >= 0; --b)
    if (bits & (1u << b)) return names[size_t(b)];
  return "none";
#else
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown";
#endif
}

void DnnlStep::run() const {
  std::array<dnnl_exec_arg_t, 8> c;
  if (args.size() > c.size()) throw std::logic_error("DnnlStep: more than 8 arguments");
  int n = 0;
  for (const auto& [key, mem] : args) c[size_t(n++)] = {key, mem.get()};
  dnnl::error::wrap_c_api(dnnl_primitive_execute(prim.get(), dnnl_stream().get(), n, c.data()),
                          "could not execute a primitive");
}

}  // namespace vg
