#include "harness/schedule.h"

#include <charconv>
#include <cmath>
#include <numbers>

#include "models/numbers.h"

namespace vg {

std::string parse_lr_schedule(const std::string& v, LrSchedule* out) {
  const std::string want = "expected constant, exp:RATE:STEPS, exp-staircase:RATE:STEPS or cosine[:FLOOR]";
  LrSchedule s;
  if (v == "constant") {
    *out = s;
    return "";
  }
  if (v == "cosine" || v.rfind("cosine:", 0) == 0) {
    s.kind = LrScheduleKind::cosine;
    if (v != "cosine") {
      const std::string why = real_in(v.substr(7), 0, 1, false, false, &s.floor);
      if (!why.empty()) return "the floor after 'cosine:' " + why;
      if (s.floor >= 1) return "the floor after 'cosine:' must be below 1 (1 is the constant rate)";
    }
    *out = s;
    return "";
  }
  const bool staircase = v.rfind("exp-staircase:", 0) == 0;
  if (!staircase && v.rfind("exp:", 0) != 0) return want;
  s.kind = staircase ? LrScheduleKind::exp_staircase : LrScheduleKind::exp;
  const std::string rest = v.substr(staircase ? 14 : 4);
  const size_t colon = rest.find(':');
  if (colon == std::string::npos) return want + " (e.g. exp:0.96:20000)";
  if (const std::string why = real_in(rest.substr(0, colon), 0, 1, true, false, &s.rate); !why.empty())
    return "RATE " + why;
  long long steps = 0;
  if (const std::string why = whole_in(rest.substr(colon + 1), 1, 1000000000000ll, &steps); !why.empty())
    return "STEPS " + why;
  s.steps = long(steps);
  *out = s;
  return "";
}

namespace {
std::string shortest(double x) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}
}  // namespace

std::string lr_schedule_text(const LrSchedule& s) {
  switch (s.kind) {
    case LrScheduleKind::constant: return "constant";
    case LrScheduleKind::exp: return "exp:" + shortest(s.rate) + ":" + std::to_string(s.steps);
    case LrScheduleKind::exp_staircase: return "exp-staircase:" + shortest(s.rate) + ":" + std::to_string(s.steps);
    case LrScheduleKind::cosine: return s.floor == 0 ? "cosine" : "cosine:" + shortest(s.floor);
  }
  return "constant";
}

double lr_factor(const LrSchedule& s, long step, long total) {
  switch (s.kind) {
    case LrScheduleKind::constant: return 1.0;
    case LrScheduleKind::exp: return std::pow(s.rate, double(step) / double(s.steps));
    case LrScheduleKind::exp_staircase: return std::pow(s.rate, double(step / s.steps));
    case LrScheduleKind::cosine:
      return s.floor + (1 - s.floor) * 0.5 * (1 + std::cos(std::numbers::pi * double(step) / double(total)));
  }
  return 1.0;
}

}  // namespace vg
