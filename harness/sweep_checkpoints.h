// A sweep's checkpoints (--checkpoint-every): each training in progress is
// checkpointed into DIR/checkpoints, one file per model, named for the first
// cell of its group ("cell-17-caps.vgck"). `sweep --resume` continues each
// training from its files; a group's files go once its cells are in cells.csv.
#pragma once
#include <string>
#include <vector>

#include "harness/sweep_plan.h"
#include "harness/train.h"

namespace vg {

// The checkpoints of the training that `lead` (its group's first cell still
// to run) leads: written at the plan's interval, resumed from under --resume.
CheckpointConfig cell_checkpoints(const SweepPlan& plan, const SweepCell& lead);

// Before any cell runs: the checkpoints of the cells finished already are
// removed, and under --resume those of `leads` are judged (CheckpointError:
// one line naming the file, exit 2). Makes DIR/checkpoints with an interval.
void prepare_checkpoints(const SweepPlan& plan, const std::vector<const SweepCell*>& leads,
                         const std::vector<int>& finished);

// Removes the checkpoints of `cell`'s training (its rows are committed).
void remove_checkpoints(const SweepPlan& plan, const SweepCell& cell);

// Once the sweep is through: DIR/checkpoints goes, if empty.
void remove_checkpoint_dir(const SweepPlan& plan);

}  // namespace vg
