#include "kernels/dense.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "kernels/dnnl_common.h"
#include "kernels/elementwise.h"

namespace vg {

using dnnl::memory;

// oneDNN matmuls over the caller's plain buffers; our weights are K x N
// row-major, never reordered or copied. Each formulation is the fastest measured
// (docs/performance.md#the-dense-layers-formulations; bench/bench_conv_dense.cpp
// keeps the alternatives as *_matmul), with the same bits at AVX2:
// - forward as a matmul, not an inner product: brgemm at AVX-512, and no sgemm
//   set-up or buffers;
// - backward data as a matmul on W's transposed view;
// - backward weights on an explicit K x B transpose of src, the elementwise
//   kernel (8 x 8 register tiles): at AVX2 the transposed view runs at half the
//   speed, and a oneDNN reorder was slower than a scalar loop.
// The forward half is built on a batch size's first forward; the backward half
// (two primitives, the K x B transpose buffer) on its first backward, so the
// evaluation batch sizes never create or allocate it.
struct Dense::Impl {
  struct Backward {
    DnnlStep data, weights;
    memory diff_dst, weights_t, diff_src;   // backward-data
    memory diff_dst_w, diff_weights;        // backward-weights (matmul on src_t)
    std::vector<float> src_t;               // K x B copy of src
    memory weights_scratchpad;              // its own: it may run beside backward-data
  };
  DnnlStep forward;
  memory src, weights, bias, dst;
  memory scratchpad;  // forward's and backward-data's (never run at once); grown for backward
  std::unique_ptr<Backward> bwd;
  memory::dim B, K, N;

  static memory::desc md(const memory::dims& d, memory::format_tag t) {
    return memory::desc(d, memory::data_type::f32, t);
  }

  Impl(int in, int out, bool relu, int batch) : B(batch), K(in), N(out) {
    using tag = memory::format_tag;
    dnnl::primitive_attr fwd_attr = user_scratchpad_attr();
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      fwd_attr.set_post_ops(ops);
    }
    // dst = src W + bias as a matmul (W is K x N row-major; the bias a 1 x N row).
    const memory::desc src_md = md({B, K}, tag::ab), dst_md = md({B, N}, tag::ab);
    const memory::desc kn_w_md = md({K, N}, tag::ab), bias_row_md = md({1, N}, tag::ab);
    const dnnl::matmul::primitive_desc fwd_pd({src_md, kn_w_md, bias_row_md, dst_md}, fwd_attr,
                                              dnnl_engine());
    src = unbound(src_md);
    weights = unbound(kn_w_md);
    bias = unbound(bias_row_md);
    dst = unbound(dst_md);
    scratchpad = scratch(fwd_pd.scratchpad_desc().get_size());
    forward = {dnnl::matmul(fwd_pd),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias},
                {DNNL_ARG_DST, dst}, {DNNL_ARG_SCRATCHPAD, scratchpad}}};
    // The plain layouts are a contract (the optimizer walks the weights as K x N): a
    // oneDNN that wanted another layout must fail loudly, not reorder silently.
    if (fwd_pd.weights_desc() != kn_w_md || fwd_pd.src_desc() != src_md || fwd_pd.dst_desc() != dst_md)
      throw std::runtime_error("Dense: oneDNN matmul did not accept plain layouts");
  }

  static memory scratch(size_t bytes) {
    return memory({{memory::dim(std::max<size_t>(bytes, 1))}, memory::data_type::u8,
                   memory::format_tag::a},
                  dnnl_engine());
  }

  Backward& backward() {
    if (bwd) return *bwd;
    using tag = memory::format_tag;
    const memory::desc src_md = md({B, K}, tag::ab), dst_md = md({B, N}, tag::ab);
    // diff_src = diff_dst W^T as a matmul on W's transposed view (strides 1, N).
    const memory::desc w_t_md({N, K}, memory::data_type::f32, memory::dims{1, N});
    const dnnl::matmul::primitive_desc data_pd({dst_md, w_t_md, src_md}, user_scratchpad_attr(),
                                               dnnl_engine());
    // diff_W = src^T diff_dst as a matmul on an explicit K x B transpose of src (above: why).
    const memory::desc src_t_md = md({K, B}, tag::ab), kn_md = md({K, N}, tag::ab);
    const dnnl::matmul::primitive_desc weights_pd({src_t_md, dst_md, kn_md}, user_scratchpad_attr(),
                                                  dnnl_engine());
    if (data_pd.weights_desc() != w_t_md || data_pd.dst_desc() != src_md)
      throw std::runtime_error("Dense: oneDNN matmul did not accept plain layouts");
    auto b = std::make_unique<Backward>();
    b->src_t.resize(size_t(K) * size_t(B));
    b->diff_dst = unbound(dst_md);
    b->weights_t = unbound(w_t_md);
    b->diff_src = unbound(src_md);
    b->diff_dst_w = unbound(dst_md);
    b->diff_weights = unbound(kn_md);
    const size_t need = data_pd.scratchpad_desc().get_size();
    b->weights_scratchpad = scratch(weights_pd.scratchpad_desc().get_size());
    if (need > scratchpad.get_desc().get_size()) {
      scratchpad = scratch(need);
      forward.args[DNNL_ARG_SCRATCHPAD] = scratchpad;
    }
    b->data = {dnnl::matmul(data_pd),
               {{DNNL_ARG_SRC, b->diff_dst}, {DNNL_ARG_WEIGHTS, b->weights_t},
                {DNNL_ARG_DST, b->diff_src}, {DNNL_ARG_SCRATCHPAD, scratchpad}}};
    b->weights = {dnnl::matmul(weights_pd),
                  {{DNNL_ARG_SRC, memory(src_t_md, dnnl_engine(), b->src_t.data())},
                   {DNNL_ARG_WEIGHTS, b->diff_dst_w},
                   {DNNL_ARG_DST, b->diff_weights}, {DNNL_ARG_SCRATCHPAD, b->weights_scratchpad}}};
    bwd = std::move(b);
    return *bwd;
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
  m.forward.run();
}

void Dense::prepare_backward(int batch) { impl(batch).backward(); }

void Dense::backward_data(float* diff_src, const float* diff_dst, const float* weights,
                          int batch) {
  Impl::Backward& m = impl(batch).backward();
  m.diff_dst.set_data_handle(const_cast<float*>(diff_dst));
  m.weights_t.set_data_handle(const_cast<float*>(weights));
  m.diff_src.set_data_handle(diff_src);
  m.data.run();
}

void Dense::backward_weights(float* diff_weights, float* diff_bias, const float* diff_dst,
                             const float* src, int batch) {
  Impl::Backward& m = impl(batch).backward();
  elementwise().transpose(m.src_t.data(), src, batch, in_);
  m.diff_dst_w.set_data_handle(const_cast<float*>(diff_dst));
  m.diff_weights.set_data_handle(diff_weights);
  m.weights.run();
  // Column sums of diff_dst: B x N adds.
  std::fill_n(diff_bias, out_, 0.f);
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
      for (int n = 0; n < out; ++n)
        acc += diff_dst[size_t(b) * out + n] * weights[size_t(k) * out + n];
      diff_src[size_t(b) * in + k] = acc;
    }
}

// diff_weights[k][n] = sum_b src[b][k] * diff_dst[b][n]; diff_bias[n] = sum_b diff_dst[b][n]
void dense_backward_weights_ref(float* diff_weights, float* diff_bias, const float* diff_dst,
                                const float* src, int batch, int in, int out) {
  for (int k = 0; k < in; ++k)
    for (int n = 0; n < out; ++n) {
      float acc = 0.f;
      for (int b = 0; b < batch; ++b)
        acc += src[size_t(b) * in + k] * diff_dst[size_t(b) * out + n];
      diff_weights[size_t(k) * out + n] = acc;
    }
  for (int n = 0; n < out; ++n) {
    float acc = 0.f;
    for (int b = 0; b < batch; ++b) acc += diff_dst[size_t(b) * out + n];
    diff_bias[n] = acc;
  }
}

}  // namespace vg
