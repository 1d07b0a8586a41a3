// The statistics tables of a sweep, summary.csv and azimuth.csv (their
// format: harness/sweep_store.h), from its cell rows.
#pragma once
#include <string>
#include <vector>

#include "harness/sweep_store.h"
#include "models/registry.h"

namespace vg {

// summary.csv and azimuth.csv from the rows (any order); `models` fixes the
// order of models; every other model is compared with `reference`, and for
// each (A, B) of `grid_pairs` (grid column strings) every model at grid point
// A with itself at B (kind "paired-grid", grid "A vs B"), at each gap; with
// `grid_pair_models`, only the models it lists for that pair
// (SweepPlan::grid_pair_models: a model trained once for both points has no
// difference to pair).
std::string summary_csv(const std::vector<CellRow>& rows, const std::vector<std::string>& models,
                        const std::string& reference = default_models().front(),
                        const std::vector<std::pair<std::string, std::string>>& grid_pairs = {},
                        const std::vector<std::vector<std::string>>& grid_pair_models = {});
std::string azimuth_csv(const std::vector<CellRow>& rows, const std::vector<std::string>& models);

}  // namespace vg
