// What a run writes: the table on stdout, the JSON document, provenance, and
// atomic file output.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "harness/train.h"

namespace vg {

inline constexpr int kRunSchemaVersion = 1;

// Commit, compiler, flags, CPU, ISA, library versions, host and time.
nlohmann::json build_meta(int threads);

// Everything SPEC section 3 asks for, with the configuration and meta.
nlohmann::json run_to_json(const RunOptions& opt, const RunResult& r, int threads);

// The seed-style table: per model params, familiar, held-out, drop, beside chance.
std::string format_run_table(const RunOptions& opt, const RunResult& r);

// Writes `content` to `path` through a temporary file in the same directory and
// rename(2), so readers never see a half-written file. Throws std::runtime_error.
void write_file_atomic(const std::string& path, const std::string& content);
// Throws std::runtime_error (with the reason) if `path` cannot be written;
// leaves nothing behind.
void check_writable(const std::string& path);

// Creates directory `path` (and parents) if absent; throws std::runtime_error
// (with the reason) if it cannot be created or written.
void make_output_dir(const std::string& path);

// "A:B" with numbers in degrees -> {A, B}; throws std::invalid_argument.
std::pair<double, double> parse_angle_range(const std::string& text);

}  // namespace vg
