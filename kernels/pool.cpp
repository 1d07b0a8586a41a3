#include "kernels/pool.h"

#include <algorithm>
#include <vector>

#include "kernels/dnnl_common.h"

namespace vg {

using dnnl::memory;
using tag = memory::format_tag;

// One forward (training: it writes the workspace) and, built on the first
// backward or prepare_backward, one backward, over the caller's nhwc buffers.
struct MaxPool2d::Impl {
  DnnlStep forward, backward;
  memory src, dst, diff_src, diff_dst;
  memory workspace, scratchpad;  // ours: one per batch size
  dnnl::pooling_forward::primitive_desc fwd_pd;  // the backward's hint
  PoolShape shape;
  int batch;

  static memory::desc md(const memory::dims& d) { return memory::desc(d, memory::data_type::f32, tag::nhwc); }
  memory::desc src_md() const { return md({batch, shape.channels, shape.height, shape.width}); }
  memory::desc dst_md() const { return md({batch, shape.channels, shape.out_height(), shape.out_width()}); }
  static memory bytes(size_t n) {
    return memory({{memory::dim(std::max<size_t>(n, 1))}, memory::data_type::u8, tag::a}, dnnl_engine());
  }

  Impl(const PoolShape& s, int batch) : shape(s), batch(batch) {
    const memory::dims window{s.kernel, s.kernel}, strides{s.stride, s.stride}, pad{0, 0};
    fwd_pd = dnnl::pooling_forward::primitive_desc(
        {dnnl::prop_kind::forward_training, dnnl::algorithm::pooling_max, src_md(), dst_md(), strides, window, pad, pad},
        user_scratchpad_attr(), dnnl_engine());
    src = unbound(src_md());
    dst = unbound(dst_md());
    workspace = memory(fwd_pd.workspace_desc(), dnnl_engine());
    scratchpad = bytes(fwd_pd.scratchpad_desc().get_size());
    forward = {dnnl::pooling_forward(fwd_pd),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}, {DNNL_ARG_WORKSPACE, workspace},
                {DNNL_ARG_SCRATCHPAD, scratchpad}}};
  }

  void build_backward() {
    if (backward.prim) return;
    const PoolShape& s = shape;
    const memory::dims window{s.kernel, s.kernel}, strides{s.stride, s.stride}, pad{0, 0};
    const dnnl::pooling_backward::primitive_desc pd(
        {dnnl::algorithm::pooling_max, src_md(), dst_md(), strides, window, pad, pad}, user_scratchpad_attr(),
        dnnl_engine(), fwd_pd);
    if (pd.scratchpad_desc().get_size() > scratchpad.get_desc().get_size()) {
      scratchpad = bytes(pd.scratchpad_desc().get_size());
      forward.args[DNNL_ARG_SCRATCHPAD] = scratchpad;
    }
    diff_src = unbound(src_md());
    diff_dst = unbound(dst_md());
    backward = {dnnl::pooling_backward(pd),
                {{DNNL_ARG_DIFF_DST, diff_dst}, {DNNL_ARG_DIFF_SRC, diff_src}, {DNNL_ARG_WORKSPACE, workspace},
                 {DNNL_ARG_SCRATCHPAD, scratchpad}}};
  }
};

MaxPool2d::MaxPool2d(const PoolShape& shape) : shape_(shape) {}
MaxPool2d::~MaxPool2d() = default;

MaxPool2d::Impl& MaxPool2d::impl(int batch) {
  std::unique_ptr<Impl>& p = per_batch_[batch];
  if (!p) p = std::make_unique<Impl>(shape_, batch);
  return *p;
}

void MaxPool2d::forward(float* dst, const float* src, int batch) {
  Impl& m = impl(batch);
  m.src.set_data_handle(const_cast<float*>(src));
  m.dst.set_data_handle(dst);
  m.forward.run();
}

void MaxPool2d::prepare_backward(int batch) { impl(batch).build_backward(); }

void MaxPool2d::backward(float* diff_src, const float* diff_dst, int batch) {
  Impl& m = impl(batch);
  m.build_backward();
  m.diff_dst.set_data_handle(const_cast<float*>(diff_dst));
  m.diff_src.set_data_handle(diff_src);
  m.backward.run();
}

// dst[b][oh][ow][c] = max_{kh,kw} src[b][oh*stride+kh][ow*stride+kw][c]
void maxpool2d_forward_ref(float* dst, const float* src, const PoolShape& s, int batch) {
  const int C = s.channels, H = s.height, W = s.width, OH = s.out_height(), OW = s.out_width();
  for (int b = 0; b < batch; ++b)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow)
        for (int c = 0; c < C; ++c) {
          float m = src[((size_t(b) * H + oh * s.stride) * W + ow * s.stride) * C + c];
          for (int kh = 0; kh < s.kernel; ++kh)
            for (int kw = 0; kw < s.kernel; ++kw)
              m = std::max(m, src[((size_t(b) * H + oh * s.stride + kh) * W + ow * s.stride + kw) * C + c]);
          dst[((size_t(b) * OH + oh) * OW + ow) * C + c] = m;
        }
}

// diff_src[argmax of window (oh, ow)][c] += diff_dst[b][oh][ow][c]
void maxpool2d_backward_ref(float* diff_src, const float* diff_dst, const float* src, const PoolShape& s,
                            int batch) {
  const int C = s.channels, H = s.height, W = s.width, OH = s.out_height(), OW = s.out_width();
  std::fill_n(diff_src, size_t(batch) * s.in_size(), 0.f);
  for (int b = 0; b < batch; ++b)
    for (int oh = 0; oh < OH; ++oh)
      for (int ow = 0; ow < OW; ++ow)
        for (int c = 0; c < C; ++c) {
          size_t best = ((size_t(b) * H + oh * s.stride) * W + ow * s.stride) * C + c;
          for (int kh = 0; kh < s.kernel; ++kh)
            for (int kw = 0; kw < s.kernel; ++kw) {
              const size_t at = ((size_t(b) * H + oh * s.stride + kh) * W + ow * s.stride + kw) * C + c;
              if (src[at] > src[best]) best = at;
            }
          diff_src[best] += diff_dst[((size_t(b) * OH + oh) * OW + ow) * C + c];
        }
}

}  // namespace vg
