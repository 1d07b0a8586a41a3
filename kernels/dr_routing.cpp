#include "kernels/dr_routing.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

namespace {
// The kernel list: one line per variant this build has.
#define VG_DR_ENTRY(isa)                                                                    \
  {Isa::isa, dr_predict_f32__##isa, dr_predict_backward_f32__##isa, dr_combine_f32__##isa, \
   dr_combine_backward_f32__##isa, dr_agree_f32__##isa, dr_agree_backward_f32__##isa}
const DrRoutingKernels kVariants[] = {
    VG_DR_ENTRY(scalar),
#if defined(__x86_64__)
    VG_DR_ENTRY(avx2),
    VG_DR_ENTRY(avx512),
#endif
#if defined(__aarch64__)
    VG_DR_ENTRY(neon),
#endif
};
#undef VG_DR_ENTRY
}  // namespace

const DrRoutingKernels* dr_routing_variants(int* count) {
  *count = int(sizeof(kVariants) / sizeof(kVariants[0]));
  return kVariants;
}

const DrRoutingKernels* dr_routing_for(Isa isa) {
  for (const auto& k : kVariants)
    if (k.isa == isa) return &k;
  return nullptr;
}

const DrRoutingKernels& dr_routing_kernels() {
  static const DrRoutingKernels& chosen = []() -> const DrRoutingKernels& {
    const DrRoutingKernels* k = dr_routing_for(selected_isa());
    return k ? *k : kVariants[0];
  }();
  return chosen;
}

void dr_squash_forward(float* v, const float* s, size_t n, int dim) {
  for (size_t q = 0; q < n; ++q) {
    const float* x = s + q * dim;
    float n2 = 0.f;
    for (int h = 0; h < dim; ++h) n2 += x[h] * x[h];
    // |s| / (1 + |s|^2) as 1 / (|s| + 1 / |s|): 0 at s = 0, and ~1 / |s| where
    // |s|^2 alone would overflow (|s| > 1.8e19 overflows the norm: NaN).
    const float nrm = std::sqrt(n2), scale = 1.f / (nrm + 1.f / nrm);
    float* y = v + q * dim;
    for (int h = 0; h < dim; ++h) y[h] = scale * x[h];
  }
}

void dr_squash_backward(float* ds, const float* dv, const float* s, size_t n, int dim) {
  for (size_t q = 0; q < n; ++q) {
    const float* x = s + q * dim;
    const float* g = dv + q * dim;
    float* d = ds + q * dim;
    float n2 = 0.f;
    for (int h = 0; h < dim; ++h) n2 += x[h] * x[h];
    const float nrm = std::sqrt(n2);
    if (nrm == 0.f) {  // the Jacobian at 0 is 0: squash(s) = O(|s|^2)
      std::fill_n(d, dim, 0.f);
      continue;
    }
    const float p = 1.f + n2, scale = nrm / p, radial = nrm * (1.f - n2) / (p * p);
    // u = s / |s| stays finite for denormal s, where 1 / |s| would not.
    float ug = 0.f;
    for (int h = 0; h < dim; ++h) ug += (x[h] / nrm) * g[h];
    for (int h = 0; h < dim; ++h) d[h] = scale * g[h] + radial * ug * (x[h] / nrm);
  }
}

void DrState::resize(int B_, int I_, int J_, int iters_) {
  auto grow = [](std::vector<float>& x, size_t n) {
    if (x.size() < n) x.resize(n);
  };
  const size_t T = size_t(iters_), nij = size_t(B_) * I_ * J_, nv = size_t(B_) * J_ * kDrOutDim;
  grow(logits, T * nij);
  grow(c, T * nij);
  grow(s, T * nv);
  grow(v, T * nv);
  grow(dlogits, nij);
  grow(dlogits_next, nij);
  grow(dv, nv);
  grow(ds, nv);
}

void dr_routing_forward(float* v, float* len, DrState& st, const float* uhat, int B, int I, int J,
                        int iters, const DrRoutingKernels& k) {
  if (iters < 1) throw std::invalid_argument("dr_routing_forward: iters must be >= 1");
  if (J > 64) throw std::invalid_argument("dr_routing_forward: at most 64 output capsules");
  const size_t nij = size_t(B) * I * J, nv = size_t(B) * J * kDrOutDim;
  if (st.frozen && (st.iters != iters || st.B != B || st.I != I || st.J != J))
    throw std::logic_error("dr_routing_forward: frozen at another shape");
  st.resize(B, I, J, iters);  // no-op once sized for the largest batch
  st.iters = iters, st.B = B, st.I = I, st.J = J;
  if (!st.frozen) std::fill_n(st.logits.begin(), nij, 0.f);  // b = 0: uniform coupling at first
  for (int r = st.frozen ? iters - 1 : 0; r < iters; ++r) {
    float* l = st.logits.data() + r * nij;
    float* s = st.s.data() + r * nv;
    float* vr = st.v.data() + r * nv;
    k.combine(s, st.c.data() + r * nij, l, uhat, B, I, J);
    dr_squash_forward(vr, s, size_t(B) * J, kDrOutDim);
    if (r + 1 < iters) k.agree(l + nij, l, uhat, vr, B, I, J);
  }
  const float* s = st.s.data() + (iters - 1) * nv;
  std::copy_n(st.v.data() + (iters - 1) * nv, nv, v);
  for (size_t q = 0; q < size_t(B) * J; ++q) {
    float n2 = 0.f;
    for (int h = 0; h < kDrOutDim; ++h) n2 += s[q * kDrOutDim + h] * s[q * kDrOutDim + h];
    len[q] = n2 / (1.f + n2);  // |squash(s)|
  }
}

void dr_routing_backward(float* duhat, const float* dv, const float* dlen, const float* uhat, DrState& st,
                         int B, int I, int J, int iters, DrGrad grad, const DrRoutingKernels& k) {
  if (st.iters != iters || st.B != B || st.I != I || st.J != J)
    throw std::logic_error("dr_routing_backward: not the shape of the last forward");
  const size_t nij = size_t(B) * I * J, nv = size_t(B) * J * kDrOutDim;
  float* dl_next = st.dlogits_next.data();  // gradient of the logits of iteration r + 1
  float* dl = st.dlogits.data();
  float* dvr = st.dv.data();
  float* ds = st.ds.data();
  std::fill_n(dl_next, nij, 0.f);
  const int first = grad == DrGrad::full ? 0 : iters - 1;
  for (int r = iters - 1; r >= first; --r) {
    const float* s = st.s.data() + r * nv;
    if (r == iters - 1 && dv != nullptr) std::copy_n(dv, nv, dvr);
    else std::fill_n(dvr, nv, 0.f);
    // b^{r+1} = b^r + u_hat . v^r: the agreement passes dl_next to v^r and u_hat.
    if (r + 1 < iters) k.agree_backward(dvr, duhat, dl_next, uhat, st.v.data() + r * nv, B, I, J);
    dr_squash_backward(ds, dvr, s, size_t(B) * J, kDrOutDim);
    if (r == iters - 1 && dlen != nullptr)
      for (size_t q = 0; q < size_t(B) * J; ++q) {
        // d(|s|^2 / (1 + |s|^2)) / ds = 2 s / (1 + |s|^2)^2
        float n2 = 0.f;
        for (int h = 0; h < kDrOutDim; ++h) n2 += s[q * kDrOutDim + h] * s[q * kDrOutDim + h];
        const float p = 1.f + n2, f = 2.f * dlen[q] / (p * p);
        for (int h = 0; h < kDrOutDim; ++h) ds[q * kDrOutDim + h] += f * s[q * kDrOutDim + h];
      }
    // b^r's gradient: the identity path from b^{r+1} plus the softmax's. The
    // logits of iteration 0 are constant (zeros), and with stopgrad c is.
    const bool through_softmax = grad == DrGrad::full && r > 0;
    if (through_softmax) std::copy_n(dl_next, nij, dl);
    k.combine_backward(duhat, through_softmax ? dl : nullptr, ds, st.c.data() + r * nij, uhat, B, I, J);
    std::swap(dl, dl_next);
  }
}

}  // namespace vg
