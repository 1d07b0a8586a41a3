// Sweep planning: the sweep's flags -> grid points x gaps x seeds as cells,
// the configuration that names the sweep (hashed into meta.json), the shard
// this process runs and the cells that fit in memory at once.
#pragma once
#include <string>
#include <vector>

#include "harness/run_flags.h"
#include "harness/sweep.h"

namespace vg {

struct SweepFlags {
  RunFlags run;
  std::string seeds = "0:29", gaps = "0,30,60,90,120", test_width = "60", jobs, out, reference;
  std::string shard;  // "K/N"
  std::string merge;  // `viewgap merge`: the shard directories, one a line
  std::vector<std::string> grid;
  bool resume = false, quiet = false;
};

// The plan of `f`: cells ordered by grid point, gap, seed (ids in that
// order), each validated as `run` would be. Throws UsageError naming the first
// bad flag or grid value.
SweepPlan plan_sweep(const SweepFlags& f);

}  // namespace vg
