// conv1 and the dense layers on oneDNN, beside the naive references.
// Run single-threaded for per-core numbers: OMP_NUM_THREADS=1 viewgap_bench
//   --benchmark_filter='conv1|dense' --benchmark_repetitions=5
// FLOPS counts the nominal multiply-adds (2 per MAC, padding taps included).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "core/rng.h"
#include "kernels/conv.h"
#include "kernels/dense.h"
#include "kernels/dnnl_common.h"

namespace vg {
namespace {

std::vector<float> normal(size_t n, uint64_t a) {
  Stream s(7, Purpose::Test, a, n);
  std::vector<float> v(n);
  for (float& x : v) x = float(s.normal());
  return v;
}

std::string isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::sse41: return "sse41";
    default: return "other";
  }
}

// Recorded in the JSON context so results from different machines are not mixed up.
const bool kContext = [] {
  const dnnl_version_t* v = dnnl_version();
  benchmark::AddCustomContext("onednn_version", std::to_string(v->major) + "." +
                                                    std::to_string(v->minor) + "." +
                                                    std::to_string(v->patch));
  benchmark::AddCustomContext("onednn_isa", isa_name());
  return true;
}();

void report(benchmark::State& state, double flops, int batch) {
  state.counters["FLOPS"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
  state.SetItemsProcessed(int64_t(state.iterations()) * batch);
}

// ---- conv1: 1->16, 5x5, stride 2, pad 2 on 32x32, ReLU ---------------------------

struct ConvData {
  ConvShape s;
  int batch;
  std::vector<float> src, weights, bias, dst, diff_dst, diff_weights, diff_bias;
  explicit ConvData(int b)
      : batch(b),
        src(normal(size_t(b) * s.in_size(), 1)),
        weights(normal(s.weight_size(), 2)),
        bias(normal(s.out_channels, 3)),
        dst(size_t(b) * s.out_size()),
        diff_dst(normal(size_t(b) * s.out_size(), 4)),
        diff_weights(s.weight_size()),
        diff_bias(s.out_channels) {}
  double flops() const {
    return 2.0 * batch * s.out_height() * s.out_width() * s.out_channels * s.in_channels *
           s.kernel * s.kernel;
  }
};

void BM_conv1_forward(benchmark::State& state) {
  ConvData d(int(state.range(0)));
  Conv2d conv(d.s, true);
  conv.forward(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data(), d.batch);  // build
  for (auto _ : state) {
    conv.forward(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data(), d.batch);
    benchmark::DoNotOptimize(d.dst.data());
  }
  report(state, d.flops(), d.batch);
}

void BM_conv1_forward_ref(benchmark::State& state) {
  ConvData d(int(state.range(0)));
  for (auto _ : state) {
    conv2d_forward_ref(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data(), d.s, d.batch,
                       true);
    benchmark::DoNotOptimize(d.dst.data());
  }
  report(state, d.flops(), d.batch);
}

void BM_conv1_backward_weights(benchmark::State& state) {
  ConvData d(int(state.range(0)));
  Conv2d conv(d.s, true);
  conv.backward_weights(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
                        d.src.data(), d.batch);
  for (auto _ : state) {
    conv.backward_weights(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
                          d.src.data(), d.batch);
    benchmark::DoNotOptimize(d.diff_weights.data());
  }
  report(state, d.flops(), d.batch);
}

void BM_conv1_backward_weights_ref(benchmark::State& state) {
  ConvData d(int(state.range(0)));
  for (auto _ : state) {
    conv2d_backward_weights_ref(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
                                d.src.data(), d.s, d.batch);
    benchmark::DoNotOptimize(d.diff_weights.data());
  }
  report(state, d.flops(), d.batch);
}

BENCHMARK(BM_conv1_forward)->ArgNames({"batch"})->Arg(32)->Arg(180);
BENCHMARK(BM_conv1_forward_ref)->ArgNames({"batch"})->Arg(32)->Arg(180);
BENCHMARK(BM_conv1_backward_weights)->ArgNames({"batch"})->Arg(32)->Arg(180);
BENCHMARK(BM_conv1_backward_weights_ref)->ArgNames({"batch"})->Arg(32)->Arg(180);

// ---- dense ------------------------------------------------------------------------

// The all-views matmul formulation measured against Dense (whose weight gradient
// reads an explicit transpose of src): here W^T and src^T are both strided views
// of the caller's buffers, the bias gradient a loop. Kept to re-measure the
// choice on other CPUs (kernels/dense.cpp says what it showed).
class DenseMatmul {
 public:
  DenseMatmul(int in, int out, bool relu, int batch) : out_(out), batch_(batch) {
    using dnnl::memory;
    const memory::dim B = batch, K = in, N = out;
    dnnl::engine& eng = dnnl_engine();
    auto matrix = [](memory::dim rows, memory::dim cols) {  // row-major
      return memory::desc({rows, cols}, memory::data_type::f32, memory::dims{cols, 1});
    };
    auto transposed = [](memory::dim rows, memory::dim cols) {  // of a row-major rows x cols
      return memory::desc({cols, rows}, memory::data_type::f32, memory::dims{1, cols});
    };
    dnnl::primitive_attr attr, fwd_attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      fwd_attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc fwd_pd(
        {matrix(B, K), matrix(K, N), matrix(1, N), matrix(B, N)}, fwd_attr, eng);
    const dnnl::matmul::primitive_desc bd_pd({matrix(B, N), transposed(K, N), matrix(B, K)},
                                             attr, eng);
    const dnnl::matmul::primitive_desc bw_pd({transposed(B, K), matrix(B, N), matrix(K, N)},
                                             attr, eng);
    const size_t bytes = std::max({fwd_pd.scratchpad_desc().get_size(),
                                   bd_pd.scratchpad_desc().get_size(),
                                   bw_pd.scratchpad_desc().get_size(), size_t(1)});
    auto mem = [&](const memory::desc& m) { return memory(m, eng, DNNL_MEMORY_NONE); };
    src_ = mem(matrix(B, K)); w_ = mem(matrix(K, N)); b_ = mem(matrix(1, N));
    dst_ = mem(matrix(B, N)); w_t_ = mem(transposed(K, N)); src_t_ = mem(transposed(B, K));
    const memory sp({{memory::dim(bytes)}, memory::data_type::u8, memory::format_tag::a}, eng);
    fwd_ = dnnl::matmul(fwd_pd);
    bd_ = dnnl::matmul(bd_pd);
    bw_ = dnnl::matmul(bw_pd);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_BIAS, b_},
                 {DNNL_ARG_DST, dst_}, {DNNL_ARG_SCRATCHPAD, sp}};
    bd_args_ = {{DNNL_ARG_SRC, dst_}, {DNNL_ARG_WEIGHTS, w_t_}, {DNNL_ARG_DST, src_},
                {DNNL_ARG_SCRATCHPAD, sp}};
    bw_args_ = {{DNNL_ARG_SRC, src_t_}, {DNNL_ARG_WEIGHTS, dst_}, {DNNL_ARG_DST, w_},
                {DNNL_ARG_SCRATCHPAD, sp}};
  }
  void forward(float* dst, const float* src, const float* w, const float* b) {
    src_.set_data_handle(const_cast<float*>(src));
    w_.set_data_handle(const_cast<float*>(w));
    b_.set_data_handle(const_cast<float*>(b));
    dst_.set_data_handle(dst);
    fwd_.execute(dnnl_stream(), fwd_args_);
  }
  void backward_data(float* diff_src, const float* diff_dst, const float* w) {
    dst_.set_data_handle(const_cast<float*>(diff_dst));
    w_t_.set_data_handle(const_cast<float*>(w));
    src_.set_data_handle(diff_src);
    bd_.execute(dnnl_stream(), bd_args_);
  }
  void backward_weights(float* diff_w, float* diff_b, const float* diff_dst, const float* src) {
    src_t_.set_data_handle(const_cast<float*>(src));
    dst_.set_data_handle(const_cast<float*>(diff_dst));
    w_.set_data_handle(diff_w);
    bw_.execute(dnnl_stream(), bw_args_);
    std::fill(diff_b, diff_b + out_, 0.f);
    for (int b = 0; b < batch_; ++b)
      for (int n = 0; n < out_; ++n) diff_b[n] += diff_dst[size_t(b) * out_ + n];
  }

 private:
  int out_, batch_;
  dnnl::memory src_, w_, b_, dst_, w_t_, src_t_;
  dnnl::primitive fwd_, bd_, bw_;
  std::unordered_map<int, dnnl::memory> fwd_args_, bd_args_, bw_args_;
};

struct DenseData {
  int in, out, batch;
  std::vector<float> src, weights, bias, dst, diff_dst, diff_src, diff_weights, diff_bias;
  explicit DenseData(const benchmark::State& state)
      : in(int(state.range(0))),
        out(int(state.range(1))),
        batch(int(state.range(2))),
        src(normal(size_t(batch) * in, 5)),
        weights(normal(size_t(in) * out, 6)),
        bias(normal(out, 7)),
        dst(size_t(batch) * out),
        diff_dst(normal(size_t(batch) * out, 8)),
        diff_src(size_t(batch) * in),
        diff_weights(size_t(in) * out),
        diff_bias(out) {}
  double flops() const { return 2.0 * batch * in * out; }
  bool relu() const { return out > 5; }  // hidden layers of the CNN; logits are linear
};

enum class Pass { forward, backward_data, backward_weights };

template <Pass pass>
void BM_dense(benchmark::State& state) {
  DenseData d(state);
  Dense dense(d.in, d.out, d.relu());
  auto run = [&] {
    if constexpr (pass == Pass::forward)
      dense.forward(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data(), d.batch);
    else if constexpr (pass == Pass::backward_data)
      dense.backward_data(d.diff_src.data(), d.diff_dst.data(), d.weights.data(), d.batch);
    else
      dense.backward_weights(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
                             d.src.data(), d.batch);
  };
  run();  // builds the primitives
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  report(state, d.flops(), d.batch);
}

template <Pass pass>
void BM_dense_matmul(benchmark::State& state) {
  DenseData d(state);
  DenseMatmul mm(d.in, d.out, d.relu(), d.batch);
  auto run = [&] {
    if constexpr (pass == Pass::forward)
      mm.forward(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data());
    else if constexpr (pass == Pass::backward_data)
      mm.backward_data(d.diff_src.data(), d.diff_dst.data(), d.weights.data());
    else
      mm.backward_weights(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
                          d.src.data());
  };
  run();
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  report(state, d.flops(), d.batch);
}

void dense_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"in", "out", "batch"});
  for (int batch : {32, 180})
    for (auto [in, out] : {std::pair{4096, 136}, {4096, 64}, {64, 5}, {136, 5}})
      b->Args({in, out, batch});
}

BENCHMARK(BM_dense<Pass::forward>)->Name("BM_dense_forward")->Apply(dense_shapes);
BENCHMARK(BM_dense<Pass::backward_data>)->Name("BM_dense_backward_data")->Apply(dense_shapes);
BENCHMARK(BM_dense<Pass::backward_weights>)->Name("BM_dense_backward_weights")->Apply(dense_shapes);
BENCHMARK(BM_dense_matmul<Pass::forward>)->Name("BM_dense_forward_matmul")->Apply(dense_shapes);
BENCHMARK(BM_dense_matmul<Pass::backward_data>)
    ->Name("BM_dense_backward_data_matmul")
    ->Apply(dense_shapes);
BENCHMARK(BM_dense_matmul<Pass::backward_weights>)
    ->Name("BM_dense_backward_weights_matmul")
    ->Apply(dense_shapes);

}  // namespace
}  // namespace vg
