// The novel-versus-familiar frontier of a sweep: for every familiar-error
// level L, each training's novel (held-out) error at the first check where its
// familiar *validation* error reached L. That is the stopping rule of
// --match-familiar and --stop-at-familiar applied for every L at once, from
// trainings that were never stopped.
//
// The rule, exactly. A check reaches L when its validation error, at the
// tables' precision (six decimals, as trajectory.csv writes it), is at most L.
// The tables hold 1 - accuracy to six decimals, so for two accuracies of one
// validation split of fewer than 500,000 images this is the stopping rules'
// "accuracy >= target" with L = 1 - target: the frontier at a matched level
// gives the novel error the stopped training gave (tests/test_frontier.cpp).
// The checks are the trajectory's (every epoch's end, and under --eval-every
// every check inside one); a rule that checks more often (--stop-check-every)
// can stop between two of them.
//
// A trajectory contributes only if every one of its checks has a validation
// error: a sweep needs --validation on (or a stopping rule) for a frontier. A
// training that never reached L is left out at L and counted (`seeds` - `n`).
//
// frontier.csv (beside summary.csv, written where it is: at a sweep's end, on
// --resume, by merge; only where the sweep keeps trajectory.csv), long form:
//   grid,axis,unit,gap,true_gap,level,kind,model,metric,seeds,n,mean,sd,median,iqm,ci_lo,ci_hi,wins,ties,losses,prob_improvement,p_value
//   level:  L, on the grid of frontier_levels.
//   kind=model:  metric heldout_error|familiar_error: the novel and the
//                familiar test error at the first check that reached L;
//                seeds: the model's trajectories with a validation error in
//                this (grid, gap); n: those that reached L; statistics over
//                the n; wins..p_value empty.
//   kind=paired: model "R-X", R the sweep's reference (summary.csv's), X each
//                other model; metric heldout_error; seeds: the seeds where
//                both have a validation trajectory, n: where both reached L;
//                statistics of d = R - X per seed; wins/ties/losses count R
//                better (smaller error)/equal/worse; prob_improvement =
//                P(R better), ties half; p_value: two-sided Wilcoxon
//                signed-rank test of d.
//   A model with no validation trajectory anywhere in the sweep (one fit in
//   one pass, nn1) has no rows, nor do its pairs. CIs as summary.csv's.
#pragma once
#include <string>
#include <vector>

#include "harness/sweep_store.h"

namespace vg {

// The level grid's step: half a percentage point, finer than the 0.6 points
// between the paper's two matched familiar errors (3.7 and 4.3 %).
inline constexpr double kFrontierStep = 0.005;

// Whether `t` takes part in the frontier: it has checks, each with a validation error.
bool has_validation(const std::vector<TrajectoryPoint>& t);
// The first check of `t` whose validation error reached `level` (the rule
// above); nullptr if none did.
const TrajectoryPoint* first_reaching(const std::vector<TrajectoryPoint>& t, double level);
// The levels of a sweep's frontier: the multiples of kFrontierStep from the
// lowest that some trajectory reached to the lowest that every trajectory
// reached at its first check (above it every row repeats that one), ascending;
// empty without a validation trajectory. One grid for every (grid, gap), so
// that they line up.
std::vector<double> frontier_levels(const std::vector<CellRow>& rows);
// frontier.csv of `rows` (any order) at `levels` (empty: frontier_levels(rows));
// `models` fixes the order of models, `reference` is compared with every other.
std::string frontier_csv(const std::vector<CellRow>& rows, const std::vector<std::string>& models,
                         const std::string& reference, std::vector<double> levels = {});

}  // namespace vg
