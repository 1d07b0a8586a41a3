// `viewgap merge DIR... --out DIR`: the sweep that directories of sweep
// results make up together, planned again from their meta.json and read.
// Two kinds of parts merge:
//   - the shards of one sweep (`sweep --shard K/N`), every K of 0..N-1 once;
//   - whole sweeps (finished, unsharded) of one configuration but for their
//     --seeds, no seed in two of them: the merge is the sweep of every seed
//     they hold, so a sweep grows by seeds run later or on another machine.
// Either way --out then holds exactly the tables the sweep run at once would
// write (timing columns aside): every cell is a pure function of its seed
// and configuration.
#pragma once
#include <string>
#include <vector>

#include "harness/sweep_plan.h"
#include "harness/sweep_store.h"

namespace vg {

struct SweepMerge {
  SweepPlan plan;      // the whole sweep's, plan.dir = --out
  MergedShards parts;  // every cell's rows, numbered as plan's cells
  bool by_seeds = false;
};

// Reads and checks every directory before --out is made or locked, so a
// refused merge leaves nothing behind. Throws std::invalid_argument naming the
// directory at fault: not a sweep, another format version or configuration,
// shards mixed with whole sweeps, a seed in two sweeps, cells unfinished
// (rerun it with --resume), a shard missing or given twice.
SweepMerge read_sweep_merge(const std::vector<std::string>& dirs, const std::string& out, bool force);

}  // namespace vg
