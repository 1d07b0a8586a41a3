// oneDNN's CPU engine, one for the process, and a stream for each thread: what
// every layer struct (conv.cpp, dense.cpp) builds and runs its primitives with.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

#include <string>

namespace vg {
dnnl::engine& dnnl_engine();
// Caps oneDNN's kernels at AVX2 (--reproducible), whatever DNNL_MAX_CPU_ISA
// says. Must run before oneDNN creates anything; throws std::runtime_error
// with the reason if oneDNN cannot be pinned there.
void pin_onednn_isa_avx2();
// The ISA oneDNN's kernels use in this process: "avx2", "avx512_core", ...;
// on aarch64 "asimd" or "sve_128" ... "sve_512".
std::string onednn_isa();
dnnl::stream& dnnl_stream();

// One primitive with its arguments bound at creation; a call only swaps data handles.
struct DnnlStep {
  dnnl::primitive prim;
  std::unordered_map<int, dnnl::memory> args;
  // Through the C API with the arguments on the stack: the C++ execute() builds
  // a std::vector of them on every call. (oneDNN's own execute still allocates
  // its argument map inside: Training.AStepAllocatesNothingOnceWarm.)
  void run() const;
};

// Scratchpads are the caller's: one buffer per shape, no allocation per call.
inline dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A memory object with no data yet: bound with set_data_handle() on each call.
inline dnnl::memory unbound(const dnnl::memory::desc& md) {
  return dnnl::memory(md, dnnl_engine(), DNNL_MEMORY_NONE);
}
}  // namespace vg
