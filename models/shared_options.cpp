#include "models/shared_options.h"

#include "models/numbers.h"

namespace vg {

EmConfig em_config(const ModelOptions& opts) {
  EmConfig em;
  em.iters = int(read_integer(opts, kEmIters));
  em.lambda = float(read_real(opts, kEmLambda));
  em.eps = float(read_real(opts, kEmEps));
  em.sigma2_min = float(read_real(opts, kEmMinVar));
  em.grad = read_choice(opts, kEmGrad) == "full" ? EmGrad::full : EmGrad::stopgrad;
  em.cost_norm = read_choice(opts, kEmCostNorm) == "on";
  const std::string sched = option_value(opts, kEmLambdaSchedule);
  if (sched == "official" || sched.rfind("official:", 0) == 0) {
    em.lambda_schedule = true;
    em.lambda = 0.01f;
    if (sched != "official") {
      double final_lambda = 0;
      if (const std::string why = real_in(sched.substr(9), 0, 1e6, true, /*single=*/true, &final_lambda); !why.empty())
        throw ModelOptionError(kEmLambdaSchedule.name, sched, "the final lambda after 'official:' " + why);
      em.lambda = float(final_lambda);
    }
  } else if (sched != "fixed") {
    throw ModelOptionError(kEmLambdaSchedule.name, sched, "expected fixed, official or official:FINAL");
  }
  return em;
}

LossConfig loss_config(const ModelOptions& opts) {
  LossConfig loss;
  const std::string name = option_value(opts, kLoss);
  try {
    loss.kind = parse_loss(name);
  } catch (const std::invalid_argument& e) {
    throw ModelOptionError(kLoss.name, name, e.what());
  }
  const std::string m = option_value(opts, kSpreadMargin);
  const auto colon = m.find(':');
  if (colon == std::string::npos) throw ModelOptionError(kSpreadMargin.name, m, "expected A:B, e.g. 0.2:0.9");
  double from = 0, to = 0;
  if (!real_in(m.substr(0, colon), 0, 1, false, /*single=*/true, &from).empty() ||
      !real_in(m.substr(colon + 1), 0, 1, false, /*single=*/true, &to).empty())
    throw ModelOptionError(kSpreadMargin.name, m, "expected A:B with 0 <= A <= B <= 1");
  loss.spread_from = float(from);
  loss.spread_to = float(to);
  if (loss.spread_from > loss.spread_to)
    throw ModelOptionError(kSpreadMargin.name, m, "the margin must grow: A <= B");
  loss.spread_schedule =
      read_choice(opts, kSpreadMarginSchedule) == "official" ? SpreadSchedule::official : SpreadSchedule::linear;
  return loss;
}

std::string em_lambda_ignored(const std::string& model, const ModelOptions& opts, const ModelOptions& given) {
  const std::string sched = option_value(opts, kEmLambdaSchedule);
  if (sched == "fixed") return "";
  if (given.count(kEmLambdaSchedule.name) == 0)
    return "model '" + model + "' runs --em-lambda-schedule '" + sched +
           "' by default, which sets lambda (add --em-lambda-schedule fixed, or give the final one as official:FINAL)";
  return "--em-lambda-schedule '" + sched + "' sets lambda (give the final one as official:FINAL)";
}

namespace {
std::string without_spread(const ModelOptions& opts) {
  const std::string loss = option_value(opts, kLoss);
  return loss == "spread" ? "" : "--loss '" + loss + "' has no margin (it applies with --loss spread)";
}
}  // namespace

std::string spread_margin_ignored(const std::string&, const ModelOptions& opts, const ModelOptions&) {
  if (std::string why = without_spread(opts); !why.empty()) return why;
  if (option_value(opts, kSpreadMarginSchedule) == "official")
    return "--spread-margin-schedule 'official' sets the margin (0.2 + 0.79 sigmoid(min(10, step / 50000 - 4)))";
  return "";
}

std::string spread_schedule_ignored(const std::string&, const ModelOptions& opts, const ModelOptions&) {
  return without_spread(opts);
}

}  // namespace vg
