// One oneDNN CPU engine and stream for the process.
#pragma once
#include <oneapi/dnnl/dnnl.hpp>

namespace vg {
dnnl::engine& dnnl_engine();
dnnl::stream& dnnl_stream();
}  // namespace vg
