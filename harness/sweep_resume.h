// A sweep's configuration read back from its meta.json: `sweep --out DIR
// --resume` continues the sweep in DIR from it alone, and `merge` rebuilds a
// shard's flags from it.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/sweep_plan.h"

namespace vg {

// The flags that plan `config` (meta.json's "config", SweepPlan::config)
// again; throws std::runtime_error where it names a flag this viewgap lacks.
SweepFlags sweep_flags_of(const nlohmann::json& config);

// Every field in which two sweep configurations differ, one "--lr is '1e-3'
// there, '2e-3' here" each; empty if none does.
std::vector<std::string> config_differences(const nlohmann::json& theirs, const nlohmann::json& ours);

// With --resume and a sweep in f.out: its flags from meta.json, with the
// flags typed beside --resume (RunFlags::typed) over them; a typed flag that
// changes the configuration is a UsageError naming every field that differs.
// Without --resume, or with no readable sweep in f.out: f as given (the
// directory's own checks say what is wrong).
SweepFlags resumed_sweep_flags(const SweepFlags& f);

}  // namespace vg
