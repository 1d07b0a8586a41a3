#include "kernels/conv.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "kernels/dnnl_common.h"

namespace vg {

using dnnl::memory;
using tag = memory::format_tag;

namespace {


void run(const std::vector<DnnlStep>& steps) {
  for (const DnnlStep& step : steps) step.run();
}


}  // namespace

// The layouts oneDNN 2.6 runs fastest for conv1's shape, whose timings are in
// docs/performance.md#conv1s-layouts:
//   forward: jit:avx2 wants src nchw, weights Ohwi8o, dst nChw8c; other layouts
//     drop it to a gemm or the reference, so we reorder the 400 weights per call
//     (<1 us) and the dst to nhwc, unless its one channel block holds every channel
//     (16 channels, nChw16c at AVX-512): those are nhwc's bytes, written in place.
//   backward-weights: jit:avx2 with src and diff_dst channel-last (no reorder of
//     the nhwc diff_dst), not the gemm it picks from nchw; it wants diff_weights
//     OIhw8i8o, reordered to oihw after. jit:avx512_core reads an nChw16c diff_dst
//     faster than an nhwc one, the same bytes and bits for 16 channels, so the
//     diff_dst is declared in the forward dst's layout.
// The forward steps are built on a batch size's first forward; the
// backward-weights steps on its first backward, so the evaluation batch sizes
// never create them.
struct Conv2d::Impl {
  std::vector<DnnlStep> forward, backward_weights, backward_data;
  // Bound to the caller's pointers on every call (plain layouts, see conv.h).
  memory src, weights, bias, dst;                     // forward
  memory bwd_src, diff_dst, diff_weights, diff_bias;  // backward-weights
  memory data_diff_dst, data_weights, diff_src;       // backward-data
  memory scratchpad;  // one buffer shared by the forward and backward-weights steps
  memory data_scratchpad;  // backward-data's own: it may run beside backward-weights
  dnnl::convolution_forward::primitive_desc fwd_pd;   // the backward's hint
  ConvShape shape;
  bool channel_last;
  int batch;

  memory::dims src_dims() const { return {batch, shape.in_channels, shape.height, shape.width}; }
  memory::dims weights_dims() const { return {shape.out_channels, shape.in_channels, shape.kernel, shape.kernel}; }
  memory::dims dst_dims() const { return {batch, shape.out_channels, shape.out_height(), shape.out_width()}; }
  static memory::desc md(const memory::dims& d, tag t) { return memory::desc(d, memory::data_type::f32, t); }

  // Where a primitive wants another layout than the caller's, a reorder step and a
  // private buffer; otherwise the caller's memory itself. Inputs are reordered before
  // the primitive (into `before`), outputs after it (into `after`). Each reorder's
  // scratchpad need is added to `bytes`.
  static memory input(std::vector<DnnlStep>& before, const memory& user, const memory::desc& want, size_t& bytes) {
    if (user.get_desc() == want) return user;
    memory own(want, dnnl_engine());
    reorder(before, user, own, bytes);
    return own;
  }
  static memory output(std::vector<DnnlStep>& after, const memory& user, const memory::desc& want, size_t& bytes) {
    if (user.get_desc() == want) return user;
    memory own(want, dnnl_engine());
    reorder(after, own, user, bytes);
    return own;
  }
  static void reorder(std::vector<DnnlStep>& steps, const memory& from, const memory& to, size_t& bytes) {
    const dnnl::reorder::primitive_desc pd(from, to, user_scratchpad_attr());
    bytes = std::max(bytes, pd.scratchpad_desc().get_size());
    steps.push_back({dnnl::reorder(pd), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}});
  }
  // Every step of both passes uses one scratchpad of at least `bytes`.
  void share_scratchpad(size_t bytes) {
    if (!scratchpad || bytes > scratchpad.get_desc().get_size())
      scratchpad = memory({{memory::dim(std::max<size_t>(bytes, 1))}, memory::data_type::u8, tag::a}, dnnl_engine());
    for (auto* steps : {&forward, &backward_weights})
      for (DnnlStep& step : *steps) step.args[DNNL_ARG_SCRATCHPAD] = scratchpad;
  }

  Impl(const ConvShape& s, bool relu, bool channel_last, int batch) : shape(s), channel_last(channel_last), batch(batch) {
    const memory::dims strides{s.stride, s.stride}, padding{s.pad, s.pad};
    const memory::desc user_src = md(src_dims(), channel_last ? tag::nhwc : tag::nchw);
    const memory::desc user_weights = md(weights_dims(), tag::oihw);
    const memory::desc user_bias = md({s.out_channels}, tag::x);
    const memory::desc user_dst = md(dst_dims(), tag::nhwc);
    dnnl::primitive_attr fwd_attr = user_scratchpad_attr();
    if (relu) {
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
      fwd_attr.set_post_ops(ops);
    }
    // A channel-last src is reordered to the layout oneDNN picks: given nhwc with a
    // blocked dst it falls back to its reference kernel (~100x slower: docs/performance.md, "conv1's layouts").
    fwd_pd = dnnl::convolution_forward::primitive_desc(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
         channel_last ? md(src_dims(), tag::any) : user_src, md(weights_dims(), tag::any), user_bias, md(dst_dims(), tag::any),
         strides, padding, padding},
        fwd_attr, dnnl_engine());
    size_t bytes = fwd_pd.scratchpad_desc().get_size();

    // forward: [weights reorder] -> conv (+ReLU) -> [dst reorder]
    src = unbound(user_src);
    weights = unbound(user_weights);
    bias = unbound(user_bias);
    // A channel-blocked dst (nChw8c, nChw16c) whose one block holds every
    // channel is nhwc's bytes: the conv then writes the caller's buffer, no copy.
    bool one_block = false;
    for (const auto& [t, width] : {std::pair{tag::nChw8c, 8}, std::pair{tag::nChw16c, 16}})
      one_block = one_block || (s.out_channels == width && fwd_pd.dst_desc() == md(dst_dims(), t));
    dst = unbound(one_block ? fwd_pd.dst_desc() : user_dst);
    std::vector<DnnlStep> after;
    const memory fwd_src = input(forward, src, fwd_pd.src_desc(), bytes);
    const memory fwd_weights = input(forward, weights, fwd_pd.weights_desc(), bytes);
    const memory fwd_dst = output(after, dst, fwd_pd.dst_desc(), bytes);
    forward.push_back({dnnl::convolution_forward(fwd_pd),
                       {{DNNL_ARG_SRC, fwd_src}, {DNNL_ARG_WEIGHTS, fwd_weights},
                        {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, fwd_dst}}});
    forward.insert(forward.end(), after.begin(), after.end());
    share_scratchpad(bytes);
  }

  // backward-weights: [diff_dst reorder] -> conv backward-weights -> [diff_weights reorder]
  void build_backward() {
    if (!backward_weights.empty()) return;  // built
    const ConvShape& s = shape;
    const memory::dims strides{s.stride, s.stride}, padding{s.pad, s.pad};
    const memory::desc user_src = md(src_dims(), tag::nchw);
    // With one input channel nchw and nhwc are the same bytes; say so, so that the
    // channel-last backward-weights reads the caller's src without a copy.
    const memory::desc user_src_nhwc = s.in_channels == 1 || channel_last ? md(src_dims(), tag::nhwc) : user_src;
    const memory::desc user_weights = md(weights_dims(), tag::oihw);
    const memory::desc user_bias = md({s.out_channels}, tag::x);
    const memory::desc user_dst = md(dst_dims(), tag::nhwc);
    const auto make_pd = [&](const memory::desc& diff_dst_desc) {
      return dnnl::convolution_backward_weights::primitive_desc(
          {dnnl::algorithm::convolution_direct, md(src_dims(), tag::nhwc), md(weights_dims(), tag::any),
           user_bias, diff_dst_desc, strides, padding, padding},
          user_scratchpad_attr(), dnnl_engine(), fwd_pd);
    };
    // The diff_dst has the forward dst's layout: where that is one channel block
    // holding every channel (nhwc's bytes, see the forward), the backward reads it
    // as such, unless oneDNN has only its reference implementation for it.
    memory::desc diff_dst_desc = dst.get_desc();
    auto bwd_pd = make_pd(diff_dst_desc);
    if (diff_dst_desc != user_dst && std::string_view(bwd_pd.impl_info_str()).starts_with("ref")) {
      diff_dst_desc = user_dst;
      bwd_pd = make_pd(user_dst);
    }
    size_t bytes = std::max(scratchpad.get_desc().get_size(), bwd_pd.scratchpad_desc().get_size());
    bwd_src = unbound(user_src_nhwc);
    diff_dst = unbound(diff_dst_desc);
    diff_weights = unbound(user_weights);
    diff_bias = unbound(user_bias);
    std::vector<DnnlStep> after;
    const memory bw_src = input(backward_weights, bwd_src, bwd_pd.src_desc(), bytes);
    const memory bw_diff_dst = input(backward_weights, diff_dst, bwd_pd.diff_dst_desc(), bytes);
    const memory bw_diff_weights = output(after, diff_weights, bwd_pd.diff_weights_desc(), bytes);
    backward_weights.push_back({dnnl::convolution_backward_weights(bwd_pd),
                                {{DNNL_ARG_SRC, bw_src}, {DNNL_ARG_DIFF_DST, bw_diff_dst},
                                 {DNNL_ARG_DIFF_WEIGHTS, bw_diff_weights},
                                 {DNNL_ARG_DIFF_BIAS, diff_bias}}});
    backward_weights.insert(backward_weights.end(), after.begin(), after.end());
    share_scratchpad(bytes);
  }

  // backward-data: [diff_dst, weights reorders] -> conv backward-data -> [diff_src reorder].
  // oneDNN picks every layout (tag::any); the caller's plain ones are reordered in and out.
  void build_backward_data() {
    if (!backward_data.empty()) return;  // built
    const ConvShape& s = shape;
    const memory::dims strides{s.stride, s.stride}, padding{s.pad, s.pad};
    const dnnl::convolution_backward_data::primitive_desc pd(
        {dnnl::algorithm::convolution_direct, md(src_dims(), tag::any), md(weights_dims(), tag::any),
         md(dst_dims(), tag::any), strides, padding, padding},
        user_scratchpad_attr(), dnnl_engine(), fwd_pd);
    size_t bytes = pd.scratchpad_desc().get_size();
    data_diff_dst = unbound(dst.get_desc());  // the bytes the forward wrote its dst as
    data_weights = unbound(md(weights_dims(), tag::oihw));
    diff_src = unbound(src.get_desc());
    std::vector<DnnlStep> after;
    const memory bd_diff_dst = input(backward_data, data_diff_dst, pd.diff_dst_desc(), bytes);
    const memory bd_weights = input(backward_data, data_weights, pd.weights_desc(), bytes);
    const memory bd_diff_src = output(after, diff_src, pd.diff_src_desc(), bytes);
    backward_data.push_back({dnnl::convolution_backward_data(pd),
                             {{DNNL_ARG_DIFF_DST, bd_diff_dst}, {DNNL_ARG_WEIGHTS, bd_weights},
                              {DNNL_ARG_DIFF_SRC, bd_diff_src}}});
    backward_data.insert(backward_data.end(), after.begin(), after.end());
    data_scratchpad = memory({{memory::dim(std::max<size_t>(bytes, 1))}, memory::data_type::u8, tag::a}, dnnl_engine());
    for (DnnlStep& step : backward_data) step.args[DNNL_ARG_SCRATCHPAD] = data_scratchpad;
  }
};

Conv2d::Conv2d(const ConvShape& shape, bool relu, bool src_channel_last)
    : shape_(shape), relu_(relu), src_channel_last_(src_channel_last) {}
Conv2d::~Conv2d() = default;

Conv2d::Impl& Conv2d::impl(int batch) {
  std::unique_ptr<Impl>& p = per_batch_[batch];
  if (!p) p = std::make_unique<Impl>(shape_, relu_, src_channel_last_, batch);
  return *p;
}

void Conv2d::forward(float* dst, const float* src, const float* weights, const float* bias,
                     int batch) {
  Impl& m = impl(batch);
  m.src.set_data_handle(const_cast<float*>(src));
  m.weights.set_data_handle(const_cast<float*>(weights));
  m.bias.set_data_handle(const_cast<float*>(bias));
  m.dst.set_data_handle(dst);
  run(m.forward);
}

void Conv2d::prepare_backward(int batch, bool data) {
  Impl& m = impl(batch);
  m.build_backward();
  if (data) m.build_backward_data();
}

void Conv2d::backward_data(float* diff_src, const float* diff_dst, const float* weights, int batch) {
  Impl& m = impl(batch);
  m.build_backward_data();
  m.data_diff_dst.set_data_handle(const_cast<float*>(diff_dst));
  m.data_weights.set_data_handle(const_cast<float*>(weights));
  m.diff_src.set_data_handle(diff_src);
  run(m.backward_data);
}

void Conv2d::backward_weights(float* diff_weights, float* diff_bias, const float* diff_dst,
                              const float* src, int batch) {
  Impl& m = impl(batch);
  m.build_backward();
  m.bwd_src.set_data_handle(const_cast<float*>(src));
  m.diff_dst.set_data_handle(const_cast<float*>(diff_dst));
  m.diff_weights.set_data_handle(diff_weights);
  m.diff_bias.set_data_handle(diff_bias);
  run(m.backward_weights);
}

// dst[b][oh][ow][o] = act(bias[o] + sum_{c,kh,kw} src[b][c][ih][iw] * weights[o][c][kh][kw]),
// ih = oh*stride - pad + kh (likewise iw); taps outside the image read zero.
void conv2d_forward_ref(float* dst, const float* src, const float* weights, const float* bias,
                        const ConvShape& s, int batch, bool relu) {
  const int OH = s.out_height(), OW = s.out_width(), O = s.out_channels, C = s.in_channels;
  const int H = s.height, W = s.width, K = s.kernel;
  for (int b = 0; b < batch; ++b)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow)
        for (int o = 0; o < O; ++o) {
          float acc = bias[o];
          for (int c = 0; c < C; ++c)
            for (int kh = 0; kh < K; ++kh) {
              const int ih = oh * s.stride - s.pad + kh;
              if (ih < 0 || ih >= H) continue;
              for (int kw = 0; kw < K; ++kw) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= W) continue;
                acc += src[((size_t(b) * C + c) * H + ih) * W + iw] *
                       weights[((size_t(o) * C + c) * K + kh) * K + kw];
              }
            }
          dst[((size_t(b) * OH + oh) * OW + ow) * O + o] = relu ? std::max(acc, 0.f) : acc;
        }
}

// diff_weights[o][c][kh][kw] = sum_{b,oh,ow} diff_dst[b][oh][ow][o] * src[b][c][ih][iw],
// diff_bias[o] = sum_{b,oh,ow} diff_dst[b][oh][ow][o].
void conv2d_backward_weights_ref(float* diff_weights, float* diff_bias, const float* diff_dst,
                                 const float* src, const ConvShape& s, int batch) {
  const int OH = s.out_height(), OW = s.out_width(), O = s.out_channels, C = s.in_channels;
  const int H = s.height, W = s.width, K = s.kernel;
  std::fill(diff_weights, diff_weights + s.weight_size(), 0.f);
  std::fill(diff_bias, diff_bias + O, 0.f);
  for (int b = 0; b < batch; ++b)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow)
        for (int o = 0; o < O; ++o) {
          const float g = diff_dst[((size_t(b) * OH + oh) * OW + ow) * O + o];
          diff_bias[o] += g;
          for (int c = 0; c < C; ++c)
            for (int kh = 0; kh < K; ++kh) {
              const int ih = oh * s.stride - s.pad + kh;
              if (ih < 0 || ih >= H) continue;
              for (int kw = 0; kw < K; ++kw) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= W) continue;
                diff_weights[((size_t(o) * C + c) * K + kh) * K + kw] +=
                    g * src[((size_t(b) * C + c) * H + ih) * W + iw];
              }
            }
        }
}

// diff_src[b][c][ih][iw] = sum_{o,kh,kw} diff_dst[b][oh][ow][o] * weights[o][c][kh][kw]
// over the outputs whose window holds (ih, iw).
void conv2d_backward_data_ref(float* diff_src, const float* diff_dst, const float* weights,
                              const ConvShape& s, int batch) {
  const int OH = s.out_height(), OW = s.out_width(), O = s.out_channels, C = s.in_channels;
  const int H = s.height, W = s.width, K = s.kernel;
  std::fill_n(diff_src, size_t(batch) * s.in_size(), 0.f);
  for (int b = 0; b < batch; ++b)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow)
        for (int o = 0; o < O; ++o) {
          const float g = diff_dst[((size_t(b) * OH + oh) * OW + ow) * O + o];
          for (int c = 0; c < C; ++c)
            for (int kh = 0; kh < K; ++kh) {
              const int ih = oh * s.stride - s.pad + kh;
              if (ih < 0 || ih >= H) continue;
              for (int kw = 0; kw < K; ++kw) {
                const int iw = ow * s.stride - s.pad + kw;
                if (iw < 0 || iw >= W) continue;
                diff_src[((size_t(b) * C + c) * H + ih) * W + iw] += g * weights[((size_t(o) * C + c) * K + kh) * K + kw];
              }
            }
        }
}

}  // namespace vg
