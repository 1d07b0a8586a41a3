#include "kernels/dnnl_common.h"

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
