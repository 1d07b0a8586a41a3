// Helpers shared by the tests: seeded random tensors and derived tolerances.
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <numeric>
#include <functional>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "data/dataset.h"
#include "data/export_norb.h"
#include "data/idx.h"
#include "kernels/isa.h"
#include "models/model.h"
#include "models/registry.h"
#include "tests/test_paths.h"

// No fault shim in a cross build.
inline const bool kHaveShim = vg::test::paths::fault_shim[0] != '\0';

namespace vg::test {

// A kernel family's variants for INSTANTIATE_TEST_SUITE_P: how many this
// build has (the test range), and each one's ISA as its test name.
template <class K>
int variant_count(const K* (*variants)(int*)) {
  int n = 0;
  variants(&n);
  return n;
}
template <class K>
auto variant_names(const K* (*variants)(int*)) {
  return [variants](const ::testing::TestParamInfo<int>& p) {
    int n = 0;
    return std::string(isa_name(variants(&n)[p.param].isa));
  };
}

// operator new calls so far on the calling thread (the test binary replaces
// operator new: tests/test_norb.cpp); `by_onednn` counts those whose caller is
// in oneDNN's library, while attribute_allocations(true) is on.
struct Allocations {
  size_t all = 0, by_onednn = 0;
};
Allocations allocations_on_this_thread();
void attribute_allocations(bool on);

// Every registered model by a name --models accepts (a numbered one bare,
// "cnn"), in the registry's order; `trained`: only those trained by steps (not nn1).
inline std::vector<std::string> registered_models(bool trained) {
  std::vector<std::string> names;
  for (const ModelEntry& e : model_registry()) {
    if (trained && e.fit_in_one_pass) continue;
    std::string n = e.name;
    if (n.size() > 1 && n.back() == 'N') n.pop_back();
    names.push_back(n);
  }
  return names;
}

// A registered model's name as a test's ("cnn-paper" -> "cnn_paper"), for
// INSTANTIATE_TEST_SUITE_P over registered_models().
inline std::string model_test_name(const ::testing::TestParamInfo<std::string>& p) {
  std::string n = p.param;
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

// n values of N(0, std^2) from the stream (key, Test, tag).
inline std::vector<float> randn(size_t n, uint64_t tag, float std = 1.f, uint64_t key = 7) {
  Stream s(key, Purpose::Test, tag);
  std::vector<float> v(n);
  for (auto& x : v) x = float(std * s.normal());
  return v;
}

inline double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t k = 0; k < a.size(); ++k) s += double(a[k]) * b[k];
  return s;
}

inline std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// B real training images (seed 3, azimuths 0 and 60, every 7th) with their
// labels: realistic inputs (mostly black background, lit strokes) for the
// models' gradient checks.
inline std::vector<float> sample_images(int B, std::vector<int>* labels) {
  DataConfig dc;
  dc.seed = 3;
  const Split s = make_split(dc, SplitId::Train, {0.0, 60.0}, 1);
  std::vector<float> x;
  for (int b = 0; b < B; ++b) {
    const int k = (b * 7) % s.size();
    x.insert(x.end(), s.image(k), s.image(k) + kImagePixels);
    labels->push_back(s.labels[size_t(k)]);
  }
  return x;
}

// A shell command's exit status (as pclose gives it; -1 if it could not
// start) and its output: how the tests call their numpy references.
struct Captured {
  int status = -1;
  std::string out;
};
inline Captured capture(const std::string& cmd) {
  Captured c;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return c;
  char buf[512];
  while (std::fgets(buf, sizeof buf, pipe)) c.out += buf;
  c.status = ::pclose(pipe);
  return c;
}

// smallNORB-format files of the rendered shapes in a fresh `dir` (one
// instance, one lighting: 810 pairs a split), every `stride`-th record kept.
inline void write_norb_fixture(const std::string& dir, int stride = 1) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  NorbExportConfig c;
  c.instances = 1;
  c.lightings = 1;
  for (NorbPart part : {NorbPart::training, NorbPart::testing}) {
    const NorbExportSplit s = render_norb_split(c, part);
    std::vector<uint8_t> pairs;
    std::vector<int32_t> labels;
    std::vector<NorbInfo> info;
    for (size_t i = 0; i < s.labels.size(); i += size_t(stride)) {
      const auto* pair = s.dat.data() + kNorbPairsHeader + i * kNorbPairBytes;
      pairs.insert(pairs.end(), pair, pair + kNorbPairBytes);
      labels.push_back(s.labels[i]);
      info.push_back(s.info[i]);
    }
    norb_write_split(norb_files(dir, part), pairs, labels, info);
  }
}

// A small IDX set in a fresh `dir`: 240 training and 60 test images of
// 28 x 28 random bytes, labels cycling through 10 classes.
inline void write_idx_fixture(const std::string& dir) {
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const IdxFiles f = idx_files(dir);
  for (const auto& [images, labels, n] : {std::tuple{f.train_images, f.train_labels, 240}, {f.test_images, f.test_labels, 60}}) {
    IdxImages im{n, 28, 28, std::vector<uint8_t>(size_t(n) * 784)};
    std::vector<uint8_t> l;
    Stream s(5, Purpose::Test, uint64_t(n));
    for (uint8_t& b : im.pixels) b = uint8_t(s.below(256));
    for (int i = 0; i < n; ++i) l.push_back(uint8_t(i % 10));
    idx_write_file(images, idx_encode_images(im));
    idx_write_file(labels, idx_encode_labels(l));
  }
}

inline int lines(const std::string& s) { return int(std::count(s.begin(), s.end(), '\n')); }

// The fields of one CSV line (no quoting: viewgap's tables quote nothing); a
// trailing comma ends in an empty field.
inline std::vector<std::string> csv_fields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  if (!line.empty() && line.back() == ',') f.push_back("");
  return f;
}

// A sweep's cells.csv without its timing column (the header's "seconds").
inline std::string without_seconds(const std::string& csv) {
  const std::string header = csv.substr(0, csv.find('\n'));
  int col = 0;
  for (size_t pos = 0, next; (next = header.find(',', pos)) != std::string::npos && header.substr(pos, next - pos) != "seconds";
       pos = next + 1)
    ++col;
  std::string out;
  size_t start = 0;
  for (size_t nl; (nl = csv.find('\n', start)) != std::string::npos; start = nl + 1) {
    const std::string line = csv.substr(start, nl - start);
    size_t from = 0;
    for (int k = 0; k < col && from != std::string::npos; ++k) from = line.find(',', from) + 1;
    const size_t to = line.find(',', from);
    out += (to == std::string::npos ? line : line.substr(0, from) + line.substr(to + 1)) + '\n';
  }
  return out;
}

// This process's scratch directory, <TempDir>/viewgap_test.<pid>/ (ctest runs
// each test in its own process), made on first use and removed with all it
// holds when the process exits normally, so that runs of the suite leave
// nothing behind. A forked child (a death test) leaves it to its parent.
inline const std::string& temp_dir() {
  struct Dir {
    pid_t owner = getpid();
    std::string path = testing::TempDir() + "viewgap_test." + std::to_string(getpid()) + "/";
    Dir() {
      std::filesystem::remove_all(path);
      std::filesystem::create_directories(path);
    }
    ~Dir() {
      std::error_code ec;  // best effort: a test's failure already says what went wrong
      if (getpid() == owner) std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir d;
  return d.path;
}

// An empty directory temp_dir()/`path`/ (emptied if a test made it before), with its trailing slash.
inline std::string fresh_dir(const std::string& path) {
  const std::string d = temp_dir() + path + "/";
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// The --data value that reads protocol source `source` in tests: a directory
// source ("norb:", "idx:") gets its fixture, written once per process; the
// others are their own name.
inline std::string fixture_data(const std::string& source) {
  static const std::string norb = [] {
    const std::string d = temp_dir() + "fixture_norb." + std::to_string(getpid());
    write_norb_fixture(d);
    return d;
  }();
  static const std::string idx = [] {
    const std::string d = temp_dir() + "fixture_idx." + std::to_string(getpid());
    write_idx_fixture(d);
    return d;
  }();
  if (source == "norb:") return source + norb;
  if (source == "idx:") return source + idx;
  return source;
}

// The viewgap binary run as a user would: exit code, stdout, stderr.
struct Outcome {
  int code;
  std::string out, err;
};

inline Outcome run(const std::string& args, const std::string& env = "") {
  // Per-process names: ctest runs the tests in parallel processes.
  const std::string tag = std::to_string(getpid());
  const std::string dir = temp_dir();
  const std::string out = dir + "viewgap_out." + tag, err = dir + "viewgap_err." + tag;
  const std::string cmd = env + " " + paths::exe + " " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// The viewgap binary started in the background, its own pid (for signals), its
// stdout discarded and its stderr to `err_file`.
inline pid_t spawn(const std::string& args, const std::string& err_file) {
  const std::string cmd = std::string("exec ") + paths::exe + " " + args + " >/dev/null 2>" + err_file;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// The fault shim (tools/fault_shim.c, LD_PRELOAD: ENOSPC or SIGKILL at the Nth
// file write), absent in a cross build; the environment that loads it, telling
// ASan it may come ahead of its runtime.
inline std::string shim_env() {
  const char* asan = std::getenv("ASAN_OPTIONS");
  return std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") + "verify_asan_link_order=0 LD_PRELOAD=" +
         paths::fault_shim;
}

}  // namespace vg::test
