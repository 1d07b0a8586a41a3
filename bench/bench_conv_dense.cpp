// conv1 and the dense layers on oneDNN, beside the naive references.
// Run single-threaded for per-core numbers: OMP_NUM_THREADS=1 viewgap_bench
//   --benchmark_filter='conv1|dense' --benchmark_repetitions=5
// FLOPS counts the nominal multiply-adds (2 per MAC, padding taps included).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/conv.h"
#include "kernels/dense.h"
#include "kernels/dnnl_common.h"
#include "kernels/rng.h"

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
  state.counters["FLOPS"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
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

// The inner-product formulation measured against Dense's matmuls: weights declared
// {N, K} "io", which is the same bytes as K x N row-major, so no reorder either.
class DenseInnerProduct {
 public:
  DenseInnerProduct(int in, int out, bool relu, int batch) {
    using tag = dnnl::memory::format_tag;
    const dnnl::memory::dim B = batch, K = in, N = out;
    dnnl::engine& eng = dnnl_engine();
    auto md = [](dnnl::memory::dims d, tag t) {
      return dnnl::memory::desc(d, dnnl::memory::data_type::f32, t);
    };
    const auto src = md({B, K}, tag::nc), w = md({N, K}, tag::io), b = md({N}, tag::x),
               dst = md({B, N}, tag::nc);
    dnnl::primitive_attr attr, fwd_attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    fwd_attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      fwd_attr.set_post_ops(ops);
    }
    const dnnl::inner_product_forward::primitive_desc fwd_pd(
        {dnnl::prop_kind::forward_training, src, w, b, dst}, fwd_attr, eng);
    const dnnl::inner_product_backward_data::primitive_desc bd_pd({src, w, dst}, attr, eng, fwd_pd);
    const dnnl::inner_product_backward_weights::primitive_desc bw_pd({src, w, b, dst}, attr, eng,
                                                                     fwd_pd);
    if (fwd_pd.weights_desc() != w || bd_pd.weights_desc() != w || bw_pd.diff_weights_desc() != w)
      throw std::runtime_error("inner product: io weights not accepted");
    const size_t bytes = std::max({fwd_pd.scratchpad_desc().get_size(),
                                   bd_pd.scratchpad_desc().get_size(),
                                   bw_pd.scratchpad_desc().get_size(), size_t(1)});
    auto mem = [&](const dnnl::memory::desc& m) { return dnnl::memory(m, eng, DNNL_MEMORY_NONE); };
    src_ = mem(src); w_ = mem(w); b_ = mem(b); dst_ = mem(dst);
    const dnnl::memory sp({{dnnl::memory::dim(bytes)}, dnnl::memory::data_type::u8, tag::a}, eng);
    fwd_ = dnnl::inner_product_forward(fwd_pd);
    bd_ = dnnl::inner_product_backward_data(bd_pd);
    bw_ = dnnl::inner_product_backward_weights(bw_pd);
    fwd_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_BIAS, b_},
                 {DNNL_ARG_DST, dst_}, {DNNL_ARG_SCRATCHPAD, sp}};
    bd_args_ = {{DNNL_ARG_DIFF_SRC, src_}, {DNNL_ARG_WEIGHTS, w_}, {DNNL_ARG_DIFF_DST, dst_},
                {DNNL_ARG_SCRATCHPAD, sp}};
    bw_args_ = {{DNNL_ARG_SRC, src_}, {DNNL_ARG_DIFF_WEIGHTS, w_}, {DNNL_ARG_DIFF_BIAS, b_},
                {DNNL_ARG_DIFF_DST, dst_}, {DNNL_ARG_SCRATCHPAD, sp}};
  }
  void forward(float* dst, const float* src, const float* w, const float* b) {
    bind(const_cast<float*>(src), const_cast<float*>(w), const_cast<float*>(b), dst);
    fwd_.execute(dnnl_stream(), fwd_args_);
  }
  void backward_data(float* diff_src, const float* diff_dst, const float* w) {
    bind(diff_src, const_cast<float*>(w), nullptr, const_cast<float*>(diff_dst));
    bd_.execute(dnnl_stream(), bd_args_);
  }
  void backward_weights(float* diff_w, float* diff_b, const float* diff_dst, const float* src) {
    bind(const_cast<float*>(src), diff_w, diff_b, const_cast<float*>(diff_dst));
    bw_.execute(dnnl_stream(), bw_args_);
  }

 private:
  void bind(float* src, float* w, float* b, float* dst) {
    src_.set_data_handle(src);
    w_.set_data_handle(w);
    if (b) b_.set_data_handle(b);
    dst_.set_data_handle(dst);
  }
  dnnl::memory src_, w_, b_, dst_;
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
void BM_dense_ip(benchmark::State& state) {
  DenseData d(state);
  DenseInnerProduct ip(d.in, d.out, d.relu(), d.batch);
  auto run = [&] {
    if constexpr (pass == Pass::forward)
      ip.forward(d.dst.data(), d.src.data(), d.weights.data(), d.bias.data());
    else if constexpr (pass == Pass::backward_data)
      ip.backward_data(d.diff_src.data(), d.diff_dst.data(), d.weights.data());
    else
      ip.backward_weights(d.diff_weights.data(), d.diff_bias.data(), d.diff_dst.data(),
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
BENCHMARK(BM_dense_ip<Pass::forward>)->Name("BM_dense_forward_ip")->Apply(dense_shapes);
BENCHMARK(BM_dense_ip<Pass::backward_data>)->Name("BM_dense_backward_data_ip")->Apply(dense_shapes);
BENCHMARK(BM_dense_ip<Pass::backward_weights>)
    ->Name("BM_dense_backward_weights_ip")
    ->Apply(dense_shapes);

}  // namespace
}  // namespace vg
