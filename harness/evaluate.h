// Evaluating a model's weights, for the training loop (harness/train.cpp) and
// for a saved model (harness/eval.cpp: `viewgap eval`), through the same
// functions, so that both report the same bits: internal to the harness;
// accuracy() and the EvalPool are train.h's.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "harness/train.h"

namespace vg {

// Of `splits`, those not yet in `out` that are not the familiar or held-out split (smallNORB's test set).
std::vector<const Split*> to_evaluate(const Dataset& data, const std::vector<const Split*>& splits,
                                      std::vector<const Split*> out = {});

// Per-sample correctness on each of `splits`, in batches of kEvalBatch, the
// batches shared between this thread (on `model`) and, given a pool and a
// `helper` (another instance holding the same weights), one job of the pool on
// the helper. Each batch is evaluated whole by one of them, so every bit is
// that of this thread alone (accuracy() is this without a helper). `meanwhile`
// runs on this thread, on `model`, once the job is posted.
std::vector<std::vector<uint8_t>> correct_on(Model& model, Model* helper, EvalPool* pool,
                                             const std::vector<const Split*>& splits,
                                             const std::function<void()>& meanwhile);

// Accuracy at each of `grid` over `splits`, a sample counted at the grid entry
// its `position` matches (`circular`: modulo 360): the familiar and held-out
// splits' per-sample correctness under the current weights is `familiar_ok` /
// `heldout_ok`, another split's is others_ok[k] for others[k].
std::vector<double> per_view(const Dataset& data, const std::vector<double>& grid,
                             const std::vector<const Split*>& splits, const std::vector<float> Split::*position,
                             bool circular, const std::vector<uint8_t>& familiar_ok,
                             const std::vector<uint8_t>& heldout_ok, const std::vector<const Split*>& others,
                             const std::vector<std::vector<uint8_t>>& others_ok);

// ModelResult::act_*: the class activations of `split` through a model with class capsules.
void class_activation_stats(Model& model, const Split& split, ModelResult* res);

// What evaluating the weights after an epoch yields.
struct EpochEval {
  double familiar = 0, heldout = 0;
  double validation = NAN;  // on Dataset::validation; NaN where it is empty
  std::vector<uint8_t> familiar_ok, heldout_ok;  // per sample
  std::vector<double> circle;                    // TrainConfig::circle_every_epoch
};

// The same images and labels, so the same correctness under any weights (the
// batches of kEvalBatch are the same too).
bool same_samples(const Split& a, const Split& b);

// What a check scores under --check-sample: at most n images of split s, a
// subsample without replacement in their order, drawn from the stream of
// (seed, Purpose::Check, which), so equal splits give equal subsamples
// (same_samples still finds them). The whole split where n >= its size.
Split check_sample_split(const Split& s, int n, uint64_t seed, uint64_t which);
// `data`'s familiar test, held-out and validation splits so subsampled, and
// nothing else: the dataset an epoch's evaluation (without the circle) reads.
Dataset check_sample_data(const Dataset& data, int n, uint64_t seed);

// Evaluates the weights after an epoch on every dataset of `sets` (the one
// trained on first): a familiar or validation split with the first's samples
// is not evaluated again, its result is the same bits.
std::vector<EpochEval> evaluate_epoch(Model& model, const std::vector<const Dataset*>& sets, bool circle);

// A trained model's final results on each of `sets`, into out[k] (which holds
// what its training recorded, if anything): familiar and held-out accuracy and
// their drop, and the validation accuracy, from last[k], the evaluation of the
// final weights; the held-out accuracy per class; the class activations, the
// circle and the axis sweep (their batches shared with `helper` on the pool,
// given one).
void final_results(std::vector<ModelResult>& out, const std::vector<EpochEval>& last,
                   const std::vector<const Dataset*>& sets, Model& model, Model* helper, EvalPool* pool);

// What `model`'s weights as they stand score on `data`: the evaluation a
// training ends with (evaluate_epoch, then final_results), with no training.
ModelResult evaluate_trained(const std::string& name, Model& model, const Dataset& data, Model* helper = nullptr,
                             EvalPool* pool = nullptr);

}  // namespace vg
