// What a run writes: the table on stdout, the JSON document, provenance, and
// file output (harness/output.h).
#pragma once
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "harness/output.h"  // write_file_atomic, check_writable, make_output_dir
#include "harness/train.h"

namespace vg {

// 2: model options ("model_options") replace "cnn_hidden" and "em"; step losses,
// fingerprint, steps and the stop rule's outcome per model. 3: the held-out
// axis ("dataset"."axis": name, unit, values, distances; per model
// "axis_accuracy") replaces "profile_elevations" and "elevation_accuracy".
// 4: "config"."model_options" holds only the options the user set; each
// model's "options" every option it read, at the value it ran with (a model's
// own defaults included: models/registry.h, model_options_of).
inline constexpr int kRunSchemaVersion = 4;

// The CPU's model name (/proc/cpuinfo), or "unknown".
std::string cpu_model();

// Commit, compiler, flags, CPU, ISA, library versions, host and time.
nlohmann::json build_meta(int threads);

// The commit this binary was built from, "-dirty" appended where the tree
// differed from it outside results/ (tools/git_version.cmake holds the rule);
// "unknown" when built outside a git checkout.
std::string build_commit();

// Which build on which machine made a result: the fields of build_meta that
// tell two builds' results apart, as a sweep's provenance.csv records them per
// cell. A field not known (a row made before the table) is "unknown"; no field
// holds a comma or a newline.
struct Provenance {
  std::string commit = "unknown";  // build_commit() without its "-dirty"
  std::string dirty = "unknown";   // yes or no: the "-dirty" of build_commit()
  std::string compiler = "unknown", cpu = "unknown", isa = "unknown", host = "unknown";
  bool operator==(const Provenance&) const = default;
};

// This process's provenance (read once).
const Provenance& this_provenance();

// 16 hex digits that change with any bit of the results: FNV-1a over every
// model's name, step losses, final and per-class accuracies and circle accuracies.
std::string run_fingerprint(const RunResult& r);

// The configuration of a run as the run JSON records it ("config"); a sweep's
// meta.json holds the same for its first cell. Its views ("train_azimuths",
// "test_azimuths", "elevations", "test_elevations") are those the protocol
// used (views_json), "protocol" and "source" name what chose them.
nlohmann::json run_config_json(const RunOptions& opt, int threads);

// The views cfg trains on and holds out (data/protocol.h: recorded_views),
// each {from, to, count, values}; "test_elevations" null: the training ones.
nlohmann::json views_json(const DataConfig& cfg);

// Everything SPEC section 3 asks for, with the configuration and meta.
nlohmann::json run_to_json(const RunOptions& opt, const RunResult& r, int threads);

// The seed-style table: per model params, familiar, held-out, drop, beside chance.
// Its first line starts with `heading`, or else with the seed and the epochs.
std::string format_run_table(const RunOptions& opt, const RunResult& r, const std::string& heading = "");

// One held-out example per class through a trained model with class capsules.
struct ClassPose {
  int label = 0, predicted = 0;
  int pose_dim = 0;
  std::vector<float> mu;  // the classes' capsules x pose_dim
  std::vector<float> a;   // the classes' activations
};

// The first example of each class in `split`, through the trained model (its
// class_capsules(); empty if it has none).
std::vector<ClassPose> class_poses(Model& model, const Split& split);

// Sabour et al.'s reconstruction figure (2017, fig. 4): for the first held-out
// example of each class, the input, the decoder's image of its true class
// capsule, and the images with one capsule dimension shifted. Of the class's
// capsule, the kReconDims dimensions of largest variance over (up to 100 of)
// that class's held-out examples are shifted, each by every kReconDeltas value.
inline constexpr int kReconDims = 4;
inline constexpr double kReconDeltas[] = {-0.25, -0.15, -0.05, 0.05, 0.15, 0.25};
struct ClassReconstructions {
  std::string model;                  // "": the model has no decoder (nothing to draw)
  std::vector<int> labels, predicted;  // per row (a class found in the split)
  std::vector<std::vector<int>> dims;  // per row: the dimensions shifted, largest variance first
  // rows x (2 + kReconDims x 6) x side x side: input, reconstruction, then
  // for each dimension in `dims` order, one image per kReconDeltas value (the
  // first channel of each).
  std::vector<float> images;
  int side = 32;  // the split's (Split::side)
  int columns() const { return 2 + int(dims.empty() ? 0 : dims[0].size()) * int(std::size(kReconDeltas)); }
};

// Through the trained `model`'s Model::decode(); empty if it has no decoder.
ClassReconstructions class_reconstructions(const std::string& model_name, Model& model, const Split& split);

// `viewgap run --dump DIR`: what the figures need beyond the run JSON.
//   DIR/run.json               run_json (with per-epoch circle snapshots)
//   DIR/dataset_azimuths.npy   float32 [5, 6, 32, 32]: azimuths 0,60..300 at elevation 30
//   DIR/dataset_elevations.npy float32 [5, 5, 32, 32]: elevations 0,20..80 at azimuth 60
//   DIR/reconstructions.npy    float32 [rows, 2 + 4 x 6, S, S]: recons.images (S: their side; only
//                              if a model has a decoder)
//   DIR/dump.json              class names, those angles, class_poses, and
//                              "reconstructions": null or {model, file, shape,
//                              labels, predicted, dims, deltas}
void write_dump(const std::string& dir, uint64_t seed, const nlohmann::json& run_json,
                const std::vector<ClassPose>& poses, const ClassReconstructions& recons);

// 2: "reconstructions" (and reconstructions.npy).
inline constexpr int kDumpSchemaVersion = 2;

// The files write_dump may write in DIR (for checking them before any work).
std::vector<std::string> dump_files(const std::string& dir);

}  // namespace vg
