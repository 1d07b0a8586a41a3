// What a run writes: the table on stdout, the JSON document, provenance, and
// file output (harness/output.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "harness/output.h"  // write_file_atomic, check_writable, make_output_dir
#include "harness/train.h"

namespace vg {

// 2: model options ("model_options") replace "cnn_hidden" and "em"; step losses,
// fingerprint, steps and the stop rule's outcome per model.
inline constexpr int kRunSchemaVersion = 2;

// The CPU's model name (/proc/cpuinfo), or "unknown".
std::string cpu_model();

// Commit, compiler, flags, CPU, ISA, library versions, host and time.
nlohmann::json build_meta(int threads);

// 16 hex digits that change with any bit of the results: FNV-1a over every
// model's name, step losses, final and per-class accuracies and circle accuracies.
std::string run_fingerprint(const RunResult& r);

// The configuration of a run as the run JSON records it ("config"); a sweep's
// meta.json holds the same for its first cell.
nlohmann::json run_config_json(const RunOptions& opt, int threads);

// Everything SPEC section 3 asks for, with the configuration and meta.
nlohmann::json run_to_json(const RunOptions& opt, const RunResult& r, int threads);

// The seed-style table: per model params, familiar, held-out, drop, beside chance.
std::string format_run_table(const RunOptions& opt, const RunResult& r);

// One held-out example per class through a trained model with class capsules.
struct ClassPose {
  int label = 0, predicted = 0;
  int pose_dim = 0;
  std::vector<float> mu;  // 5 class capsules x pose_dim
  std::vector<float> a;   // 5 activations
};

// The first example of each class in `split`, through the trained model (its
// class_capsules(); empty if it has none).
std::vector<ClassPose> class_poses(Model& model, const Split& split);

// `viewgap run --dump DIR`: what the figures need beyond the run JSON.
//   DIR/run.json               run_json (with per-epoch circle snapshots)
//   DIR/dataset_azimuths.npy   float32 [5, 6, 32, 32]: azimuths 0,60..300 at elevation 30
//   DIR/dataset_elevations.npy float32 [5, 5, 32, 32]: elevations 0,20..80 at azimuth 60
//   DIR/dump.json              class names, those angles, class_poses
void write_dump(const std::string& dir, uint64_t seed, const nlohmann::json& run_json,
                const std::vector<ClassPose>& poses);

// The files write_dump writes in DIR (for checking them before any work).
std::vector<std::string> dump_files(const std::string& dir);

}  // namespace vg
