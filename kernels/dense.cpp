#include "kernels/dense.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "kernels/dnnl_common.h"

namespace vg {

using dnnl::memory;

namespace {

// One primitive with its arguments bound at creation; a call only swaps data handles.
struct Step {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

void run(const Step& step) { step.prim.execute(dnnl_stream(), step.args); }

dnnl::primitive_attr user_scratchpad_attr() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A row-major rows x cols matrix, or its transpose viewed in place (strides {1, rows}).
memory::desc matrix(memory::dim rows, memory::dim cols) {
  return {{rows, cols}, memory::data_type::f32, memory::dims{cols, 1}};
}
memory::desc transposed(memory::dim rows, memory::dim cols) {
  return {{cols, rows}, memory::data_type::f32, memory::dims{1, cols}};
}

memory unbound(const memory::desc& md) { return memory(md, dnnl_engine(), DNNL_MEMORY_NONE); }

}  // namespace

// Three matmul primitives over the caller's plain buffers; the transposes are strided
// views, so nothing is ever reordered or copied. (oneDNN 2.6 runs all three as its
// jit sgemm; inner_product with "io" weights calls the same sgemm and measured the same,
// see bench/bench_conv_dense.cpp.)
struct Dense::Impl {
  Step forward, backward_data, backward_weights;
  memory src, weights, bias, dst;              // forward:  dst = act(src W + bias)
  memory diff_dst_bd, weights_t, diff_src;     // backward-data: diff_src = diff_dst W^T
  memory src_t, diff_dst_bw, diff_weights;     // backward-weights: diff_W = src^T diff_dst
  memory scratchpad;

  Impl(int in, int out, bool relu, int batch) {
    const memory::dim B = batch, K = in, N = out;
    dnnl::engine& eng = dnnl_engine();

    dnnl::primitive_attr fwd_attr = user_scratchpad_attr();
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      fwd_attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc fwd_pd({matrix(B, K), matrix(K, N), matrix(1, N), matrix(B, N)},
                                              fwd_attr, eng);
    const dnnl::matmul::primitive_desc bwd_data_pd({matrix(B, N), transposed(K, N), matrix(B, K)},
                                                   user_scratchpad_attr(), eng);
    const dnnl::matmul::primitive_desc bwd_weights_pd(
        {transposed(B, K), matrix(B, N), matrix(K, N)}, user_scratchpad_attr(), eng);

    src = unbound(matrix(B, K));
    weights = unbound(matrix(K, N));
    bias = unbound(matrix(1, N));
    dst = unbound(matrix(B, N));
    diff_dst_bd = unbound(matrix(B, N));
    weights_t = unbound(transposed(K, N));
    diff_src = unbound(matrix(B, K));
    src_t = unbound(transposed(B, K));
    diff_dst_bw = unbound(matrix(B, N));
    diff_weights = unbound(matrix(K, N));

    const size_t bytes = std::max({fwd_pd.scratchpad_desc().get_size(),
                                   bwd_data_pd.scratchpad_desc().get_size(),
                                   bwd_weights_pd.scratchpad_desc().get_size(), size_t(1)});
    scratchpad = memory({{memory::dim(bytes)}, memory::data_type::u8, memory::format_tag::a}, eng);

    forward = {dnnl::matmul(fwd_pd),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias},
                {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}}};
    backward_data = {dnnl::matmul(bwd_data_pd),
                     {{DNNL_ARG_SRC, diff_dst_bd}, {DNNL_ARG_WEIGHTS, weights_t},
                      {DNNL_ARG_DST, diff_src}, {DNNL_ARG_SCRATCHPAD, scratchpad}}};
    backward_weights = {dnnl::matmul(bwd_weights_pd),
                        {{DNNL_ARG_SRC, src_t}, {DNNL_ARG_WEIGHTS, diff_dst_bw},
                         {DNNL_ARG_DST, diff_weights}, {DNNL_ARG_SCRATCHPAD, scratchpad}}};
  }
};

Dense::Dense(int in_features, int out_features, bool relu)
    : in_(in_features), out_(out_features), relu_(relu) {}
Dense::~Dense() = default;

Dense::Impl& Dense::impl(int batch) {
  std::unique_ptr<Impl>& p = per_batch_[batch];
  if (!p) p = std::make_unique<Impl>(in_, out_, relu_, batch);
  return *p;
}

void Dense::forward(float* dst, const float* src, const float* weights, const float* bias,
                    int batch) {
  Impl& m = impl(batch);
  m.src.set_data_handle(const_cast<float*>(src));
  m.weights.set_data_handle(const_cast<float*>(weights));
  m.bias.set_data_handle(const_cast<float*>(bias));
  m.dst.set_data_handle(dst);
  run(m.forward);
}

void Dense::backward_data(float* diff_src, const float* diff_dst, const float* weights,
                          int batch) {
  Impl& m = impl(batch);
  m.diff_dst_bd.set_data_handle(const_cast<float*>(diff_dst));
  m.weights_t.set_data_handle(const_cast<float*>(weights));
  m.diff_src.set_data_handle(diff_src);
  run(m.backward_data);
}

void Dense::backward_weights(float* diff_weights, float* diff_bias, const float* diff_dst,
                             const float* src, int batch) {
  Impl& m = impl(batch);
  m.src_t.set_data_handle(const_cast<float*>(src));
  m.diff_dst_bw.set_data_handle(const_cast<float*>(diff_dst));
  m.diff_weights.set_data_handle(diff_weights);
  run(m.backward_weights);
  // Column sums: B*N adds, not worth a primitive.
  std::fill(diff_bias, diff_bias + out_, 0.f);
  for (int b = 0; b < batch; ++b)
    for (int n = 0; n < out_; ++n) diff_bias[n] += diff_dst[size_t(b) * out_ + n];
}

// dst[b][n] = act(bias[n] + sum_k src[b][k] * weights[k][n])
void dense_forward_ref(float* dst, const float* src, const float* weights, const float* bias,
                       int batch, int in, int out, bool relu) {
  for (int b = 0; b < batch; ++b)
    for (int n = 0; n < out; ++n) {
      float acc = bias[n];
      for (int k = 0; k < in; ++k) acc += src[size_t(b) * in + k] * weights[size_t(k) * out + n];
      dst[size_t(b) * out + n] = relu ? std::max(acc, 0.f) : acc;
    }
}

// diff_src[b][k] = sum_n diff_dst[b][n] * weights[k][n]
void dense_backward_data_ref(float* diff_src, const float* diff_dst, const float* weights,
                             int batch, int in, int out) {
  for (int b = 0; b < batch; ++b)
    for (int k = 0; k < in; ++k) {
      float acc = 0.f;
      for (int n = 0; n < out; ++n) acc += diff_dst[size_t(b) * out + n] * weights[size_t(k) * out + n];
      diff_src[size_t(b) * in + k] = acc;
    }
}

// diff_weights[k][n] = sum_b src[b][k] * diff_dst[b][n]; diff_bias[n] = sum_b diff_dst[b][n]
void dense_backward_weights_ref(float* diff_weights, float* diff_bias, const float* diff_dst,
                                const float* src, int batch, int in, int out) {
  for (int k = 0; k < in; ++k)
    for (int n = 0; n < out; ++n) {
      float acc = 0.f;
      for (int b = 0; b < batch; ++b) acc += src[size_t(b) * in + k] * diff_dst[size_t(b) * out + n];
      diff_weights[size_t(k) * out + n] = acc;
    }
  for (int n = 0; n < out; ++n) {
    float acc = 0.f;
    for (int b = 0; b < batch; ++b) acc += diff_dst[size_t(b) * out + n];
    diff_bias[n] = acc;
  }
}

}  // namespace vg
