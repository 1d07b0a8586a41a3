// Learning-rate schedules (run --lr-schedule): each a pure function of the
// global step and the training's length, so a training resumed from a
// checkpoint takes the rates of one never stopped. docs/cli.md#budgets-and-schedules.
#pragma once
#include <string>

namespace vg {

// The rate of the step that follows `step` steps taken, as a factor of the
// model's base rate (--lr, or its --model-lr):
//   constant             1 (the default)
//   exp:RATE:STEPS       RATE^(step / STEPS), decaying smoothly: capsule_em's
//                        (google-research, model.py: tf.train.exponential_decay,
//                        staircase off by default in experiment.py) is exp:0.96:20000
//   exp-staircase:RATE:STEPS  RATE^floor(step / STEPS): a drop every STEPS steps
//   cosine[:FLOOR]       FLOOR + (1 - FLOOR) (1 + cos(pi step / T)) / 2 over the
//                        training's T steps (Loshchilov & Hutter 2017, one cycle):
//                        1 at the first step, FLOOR (default 0) one step after the last
enum class LrScheduleKind { constant, exp, exp_staircase, cosine };
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::constant;
  double rate = 1;   // exp: the factor per `steps` steps, in (0, 1]
  long steps = 1;    // exp: the steps over which the rate falls by `rate`
  double floor = 0;  // cosine: the factor it decays to, in [0, 1)
};

// Parses --lr-schedule's value into `out`; returns why it is no schedule, or "".
std::string parse_lr_schedule(const std::string& v, LrSchedule* out);

// The schedule as --lr-schedule spells it, numbers in their shortest exact form
// (parse_lr_schedule gives it back).
std::string lr_schedule_text(const LrSchedule& s);

// The factor of the step after `step` steps taken, of a training of `total`
// steps (cosine's T; the others ignore it). Exactly 1 for constant.
double lr_factor(const LrSchedule& s, long step, long total);

}  // namespace vg
