#include "models/loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vg {

const char* loss_name(LossKind kind) {
  switch (kind) {
    case LossKind::xent: return "xent";
    case LossKind::spread: return "spread";
    case LossKind::margin: return "margin";
  }
  return "?";
}

LossKind parse_loss(const std::string& name) {
  for (LossKind k : {LossKind::xent, LossKind::spread, LossKind::margin})
    if (name == loss_name(k)) return k;
  throw std::invalid_argument(std::string("unknown loss (expected ") + kLossNames + ")");
}

float spread_margin(const LossConfig& cfg, double progress, long step) {
  if (cfg.spread_schedule == SpreadSchedule::official) {
    const double x = std::min(10.0, double(step) / 50000.0 - 4.0);
    return float(0.2 + 0.79 / (1.0 + std::exp(-x)));
  }
  const double p = std::clamp(progress, 0.0, 1.0);
  return float(cfg.spread_from + (double(cfg.spread_to) - cfg.spread_from) * p);
}

float spread_final_margin(const LossConfig& cfg, long total_steps) {
  return spread_margin(cfg, 1.0, std::max(0L, total_steps - 1));
}

double spread_loss(const float* a, const int* labels, int B, int C, float m) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    const float* ab = a + size_t(b) * C;
    const int t = labels[b];
    for (int i = 0; i < C; ++i) {
      if (i == t) continue;
      const double r = std::max(0.0, double(m) - (double(ab[t]) - ab[i]));
      loss += r * r;
    }
  }
  return loss / B;
}

double softmax_xent(float* dlogits, const float* logits, const int* labels, int B, int C) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    const float* l = logits + size_t(b) * C;
    float mx = l[0];
    for (int c = 1; c < C; ++c) mx = std::max(mx, l[c]);
    double z = 0.0;
    for (int c = 0; c < C; ++c) z += std::exp(double(l[c] - mx));
    const double log_z = std::log(z) + mx;
    loss += log_z - l[labels[b]];
    for (int c = 0; c < C; ++c)
      dlogits[size_t(b) * C + c] =
          float((std::exp(double(l[c]) - log_z) - (c == labels[b] ? 1.0 : 0.0)) / B);
  }
  return loss / B;
}

namespace {

// sum_{i != t} max(0, m - (a_t - a_i))^2; d/da_i = 2 r_i, d/da_t = -sum 2 r_i.
double spread(float* d, const float* a, const int* labels, int B, int C, float m) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b) {
    const float* ab = a + size_t(b) * C;
    float* db = d + size_t(b) * C;
    const int t = labels[b];
    double dt = 0.0;
    for (int i = 0; i < C; ++i) {
      db[i] = 0.f;
      if (i == t) continue;
      const double r = std::max(0.0, double(m) - (double(ab[t]) - ab[i]));
      loss += r * r;
      db[i] = float(2 * r / B);
      dt -= 2 * r / B;
    }
    db[t] = float(dt);
  }
  return loss / B;
}

// T_k max(0, m+ - s_k)^2 + lambda (1 - T_k) max(0, s_k - m-)^2.
double margin(float* d, const float* s, const int* labels, int B, int C, const LossConfig& cfg) {
  double loss = 0.0;
  for (int b = 0; b < B; ++b)
    for (int k = 0; k < C; ++k) {
      const double x = s[size_t(b) * C + k];
      double g;
      if (k == labels[b]) {
        const double r = std::max(0.0, double(cfg.m_pos) - x);
        loss += r * r;
        g = -2 * r;
      } else {
        const double r = std::max(0.0, x - double(cfg.m_neg));
        loss += cfg.m_lambda * r * r;
        g = 2 * cfg.m_lambda * r;
      }
      d[size_t(b) * C + k] = float(g / B);
    }
  return loss / B;
}

}  // namespace

double loss_forward_backward(const LossConfig& cfg, float* dscores, const float* scores,
                             const int* labels, int B, int C, double progress, long step) {
  // A non-finite score is a non-finite loss, whatever the loss: the hinge of
  // the spread and margin losses (max(0, m - NaN) = 0) would otherwise hide it.
  for (int k = 0; k < B * C; ++k)
    if (!std::isfinite(scores[k])) return NAN;
  switch (cfg.kind) {
    case LossKind::xent: return softmax_xent(dscores, scores, labels, B, C);
    case LossKind::spread: return spread(dscores, scores, labels, B, C, spread_margin(cfg, progress, step));
    case LossKind::margin: return margin(dscores, scores, labels, B, C, cfg);
  }
  return 0.0;
}

}  // namespace vg
