// viewgap profile: per-layer forward/backward timings of training steps,
// against this core's measured FMA peak.
#pragma once
#include <string>

#include "harness/train.h"

namespace vg {

struct ProfileOptions {
  std::string model = default_models().front();
  int batch = 32, steps = 200, warmup = 20;
  TrainConfig train;
  DataConfig data;  // the images trained on (run's data flags); its seed is train.seed
  std::string out_csv, trace;  // trace: Chrome trace-event JSON, "" for none
};

// Runs opt.steps training steps (after opt.warmup untimed ones) on opt.data;
// writes the CSV (and trace) atomically and prints a table on stdout.
void run_profile(const ProfileOptions& opt);

}  // namespace vg
