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

// Under --resume, before anything is written: the checkpoints of `leads`
// are judged (CheckpointError: one line naming the file, exit 2).
void check_checkpoints(const SweepPlan& plan, const std::vector<const SweepCell*>& leads);

// A training that `lead` leads and that also evaluates cells of other sweeps
// (`with`, run_sweeps): its checkpoints, apart from a training of lead's own
// ("cell-17-joint-caps.vgck"), their configuration every cell's, so that only
// the same cells together resume them; and their judging, as check_checkpoints'.
CheckpointConfig joint_checkpoints(const SweepPlan& plan, const SweepCell& lead, const std::vector<const SweepCell*>& with);
void check_joint_checkpoints(const SweepPlan& plan, const SweepCell& lead, const std::vector<const SweepCell*>& with);
// Whether a training of lead's own left checkpoints (run_sweeps then resumes it alone).
bool has_checkpoints(const SweepPlan& plan, const SweepCell& lead);
// Once meta.json is written (the directory is a sweep's): DIR/checkpoints made
// with an interval, its stale temporary files and the checkpoints of the cells
// finished already removed.
void prepare_checkpoints(const SweepPlan& plan, const std::vector<int>& finished);

// Removes the checkpoints of `cell`'s training, its own or joint (its rows are committed).
void remove_checkpoints(const SweepPlan& plan, const SweepCell& cell);

// Once the sweep is through: DIR/checkpoints goes, if empty.
void remove_checkpoint_dir(const SweepPlan& plan);

}  // namespace vg
