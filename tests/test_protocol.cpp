// Every registered protocol (data/protocol.h), chosen by its own flags through
// the command line's validation: its splits are disjoint in viewpoint, its
// bytes do not depend on the run or the thread count, and its held-out
// distances agree with its gap. A new protocol is tested by registering.
#include <gtest/gtest.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <tuple>

#include "data/plane_views.h"
#include "data/protocol.h"
#include "harness/run_flags.h"
#include "tests/protocol_util.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::configured;
using test::flags_choosing;
using test::made_in_tests;

// The viewpoints of a split, rounded to 1e-3 degrees (azimuth mod 360), and
// (`with_axis`) each sample's position on the protocol's axis, which for an
// in-plane change (a shift, a turn) is what is novel at a training viewpoint.
using View = std::tuple<long, long, long>;
std::set<View> views(const Split& s, bool with_axis = false) {
  std::set<View> v;
  for (int i = 0; i < s.size(); ++i)
    v.insert({std::lround(std::fmod(s.azimuth[size_t(i)] + 360.0, 360.0) * 1000) % 360000,
              std::lround(s.elevation[size_t(i)] * 1000.0),
              with_axis ? std::lround(s.axis[size_t(i)] * 1000.0) : 0});
  return v;
}

TEST(Protocol, NamesAndSplitsAreUniqueAndEachIsChosenByItsOwnFlags) {
  std::set<std::string> names, splits;
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    EXPECT_TRUE(names.insert(p.name).second);
    if (p.split != nullptr) {
      EXPECT_TRUE(splits.insert(std::string(p.source) + p.split).second);
    }
    EXPECT_STREQ(select_run_protocol(flags_choosing(p), RunFlags{}).name, p.name);
    ASSERT_NE(p.configure, nullptr);
    ASSERT_NE(p.make, nullptr);
    ASSERT_NE(p.distance, nullptr);
    ASSERT_NE(p.describe, nullptr);
    ASSERT_NE(p.sweep_gap, nullptr);
    // The protocol that made a configuration answers for it with the same operations.
    const DataConfig cfg = configured(p);
    EXPECT_EQ(protocol_of(cfg).make, p.make);
    EXPECT_EQ(protocol_of(cfg).distance, p.distance);
    EXPECT_STREQ(protocol_of(cfg).axis.name, p.axis.name);
    EXPECT_FALSE(p.check(cfg, false).has_value());
  }
}

TEST(Protocol, NoHeldOutViewIsATrainingView) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    const Dataset d = p.make(configured(p));
    ASSERT_GT(d.train.size(), 0);
    ASSERT_GT(d.heldout.size(), 0);
    const auto train = views(d.train), familiar = views(d.familiar);
    // Familiar means at the training viewpoints.
    for (const auto& [az, el, a] : familiar) EXPECT_TRUE(train.count({az, el, a})) << az << "," << el;
    if (d.heldout_is_familiar) {  // every viewpoint is a training one: nothing is held out
      EXPECT_STREQ(p.axis.name, "none");
      continue;
    }
    const auto train_axis = views(d.train, true);
    for (const auto& [az, el, a] : views(d.heldout, true))
      EXPECT_FALSE(train_axis.count({az, el, a})) << az << "," << el << " at " << a / 1000.0 << " " << p.axis.unit;
  }
}

// Every split's bytes, viewpoints and labels, and a training draw's.
std::vector<float> bytes_of(const Dataset& d) {
  std::vector<float> out;
  for (const Split* s : {&d.train, &d.familiar, &d.heldout, &d.circle, &d.validation, &d.axis_sweep}) {
    out.insert(out.end(), s->axis.begin(), s->axis.end());
    out.insert(out.end(), s->images.begin(), s->images.end());
    out.insert(out.end(), s->azimuth.begin(), s->azimuth.end());
    out.insert(out.end(), s->elevation.begin(), s->elevation.end());
    for (int l : s->labels) out.push_back(float(l));
  }
  if (d.train.draw) {
    std::vector<float> sample(d.train.pixels());
    for (int i : {0, d.train.size() - 1}) {
      d.train.draw(i, 3, sample.data());
      out.insert(out.end(), sample.begin(), sample.end());
    }
  }
  return out;
}

TEST(Protocol, SameConfigurationSameBytesOnAnyThreadCount) {
  const int threads = omp_get_max_threads();
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    const DataConfig cfg = configured(p);
    omp_set_num_threads(1);
    const std::vector<float> one = bytes_of(p.make(cfg));
    omp_set_num_threads(3);
    const std::vector<float> three = bytes_of(p.make(cfg));
    omp_set_num_threads(threads);
    ASSERT_EQ(one.size(), three.size());
    EXPECT_EQ(std::memcmp(one.data(), three.data(), one.size() * sizeof(float)), 0);
    // Another seed draws other noise (or other training crops, or in-plane
    // changes); an IDX set's standard split is its files' whatever the seed (IdxSource.ValidationPartIsDrawnBySeed
    // tests the one draw it makes).
    DataConfig other = cfg;
    other.seed += 1;
    if (cfg.idx && !cfg.plane) {
      EXPECT_EQ(bytes_of(p.make(other)), one);
    } else {
      EXPECT_NE(bytes_of(p.make(other)), one);
    }
  }
}

TEST(Protocol, HeldOutDistancesAgreeWithTheGap) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    const DataConfig cfg = configured(p);
    const Dataset d = p.make(cfg);
    const std::vector<double> held = heldout_distances(p, cfg, d.heldout), fam = heldout_distances(p, cfg, d.familiar);
    ASSERT_EQ(int(held.size()), d.heldout.size());
    for (double x : fam) EXPECT_EQ(x, 0.0);  // familiar views lie on the training ones
    // The protocol's own gap; for the viewing angles, the dataset's too.
    const std::string axis = p.axis.name;
    const double gap = p.sweep_gap(cfg);
    if (axis == "azimuth") {
      EXPECT_DOUBLE_EQ(gap, d.gap_deg);
    }
    if (axis == "elevation") {
      EXPECT_DOUBLE_EQ(gap, d.elev_gap_deg);
    }
    EXPECT_NEAR(*std::min_element(held.begin(), held.end()), gap, 1e-6 * std::max(1.0, gap));  // float positions
    if (!d.heldout_is_familiar) {
      EXPECT_GT(gap, 0.0);
    }
  }
}

// The axis sweep: every sample of its splits lies at one of axis_values, and
// the distance the protocol gives each value is the viewpoint's own distance
// from the training views along the axis (azimuth: circular; none: 0).
TEST(Protocol, AxisSweepCarriesValuesAndDistancesOfTheAxis) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    ASSERT_NE(p.axis_values, nullptr);
    const DataConfig cfg = configured(p);
    const Dataset d = p.make(cfg);
    EXPECT_EQ(d.axis_values, p.axis_values(cfg));
    ASSERT_FALSE(d.axis_values.empty());
    EXPECT_TRUE(std::is_sorted(d.axis_values.begin(), d.axis_values.end()));
    const std::vector<double> dist = axis_distances(p, cfg);
    ASSERT_EQ(dist.size(), d.axis_values.size());
    const std::string axis = p.axis.name;
    std::vector<int> seen(d.axis_values.size(), 0);
    for (const Split* s : d.axis_splits()) {
      ASSERT_EQ(int(s->axis.size()), s->size());
      for (int k = 0; k < s->size(); ++k) {
        const double v = s->axis[size_t(k)];
        const auto it = std::find(d.axis_values.begin(), d.axis_values.end(), v);
        ASSERT_NE(it, d.axis_values.end()) << v;
        ++seen[size_t(it - d.axis_values.begin())];
        double want = 0.0;  // axis none: nothing is held out
        if (cfg.plane) {    // an in-plane change: its magnitude beyond training's largest
          want = std::max(0.0, v - cfg.plane->train_max);
        } else if (axis == "elevation") {
          EXPECT_EQ(v, s->elevation[size_t(k)]);
          double e_min = INFINITY;
          for (double e : training_elevations(cfg)) e_min = std::min(e_min, std::fabs(s->elevation[size_t(k)] - e));
          want = e_min;
        } else if (axis == "azimuth") {
          EXPECT_EQ(v, s->azimuth[size_t(k)]);
          want = azimuth_gap(training_azimuths(cfg), {s->azimuth[size_t(k)]});
        }
        EXPECT_DOUBLE_EQ(p.distance(cfg, v), want);
        EXPECT_DOUBLE_EQ(dist[size_t(it - d.axis_values.begin())], want);
      }
    }
    for (int n : seen) EXPECT_GT(n, 0);  // the sweep covers each of its values
    // Every split says where its samples lie on the axis.
    for (const Split* s : {&d.train, &d.familiar, &d.heldout}) EXPECT_EQ(int(s->axis.size()), s->size());
  }
}

// A sweep over the distance: the held-out set at distance g is sound, its
// true gap (cells.csv's) is g along the protocol's axis, and its nearest
// held-out view lies exactly g from the training ones.
TEST(Protocol, SweepPlacesTheHeldOutSetAtEachDistance) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    if (p.at_distance == nullptr) {  // a fixed held-out set: swept once, at its own gap
      ASSERT_EQ(p.swept_flag, nullptr);
      continue;
    }
    ASSERT_NE(p.heldout_text, nullptr);
    const DataConfig cfg = configured(p);
    // Degrees for the viewing angles; an in-plane change's own steps (pixels, a scale).
    const double step = cfg.plane ? cfg.plane->factor->profile_step : 10.0;
    for (double g : {0.0, step, 2 * step}) {
      SCOPED_TRACE(g);
      const DataConfig at = p.at_distance(cfg, g, 40);
      EXPECT_FALSE(p.check(at, true).has_value());
      EXPECT_DOUBLE_EQ(p.sweep_gap(at), g);
      if (g == 0) continue;  // at gap 0 the held-out set touches the training set's end
      const Dataset d = p.make(at);
      const std::vector<double> held = heldout_distances(p, at, d.heldout);
      EXPECT_NEAR(*std::min_element(held.begin(), held.end()), g, 1e-4);  // float azimuths
    }
    // An elevation band moved out of [-90, 90] is a geometry problem (a sweep names --gaps).
    if (p.swept_flag == nullptr) {
      const auto problem = p.check(p.at_distance(cfg, 170, 40), true);
      ASSERT_TRUE(problem.has_value());
      EXPECT_EQ(problem->part, GeometryPart::test_elev_range);
    }
  }
}

// The command line that chooses `p` (as flags_choosing does).
std::string args_choosing(const Protocol& p) {
  const RunFlags f = flags_choosing(p), def;
  std::string args;
  for (const FlagSpec& s : run_flag_specs())
    if (f.*(s.field) != def.*(s.field)) args += " --" + std::string(s.name) + " " + f.*(s.field);
  for (const auto& [name, value] : f.protocol)
    if (value != def.protocol.at(name)) args += " --" + name + " " + value;
  return args;
}

TEST(Protocol, ThreadsChangeNoResultOfARun) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!made_in_tests(p)) continue;
    std::string tail[2];
    for (int t : {1, 2}) {
      const test::Outcome o = test::run("run --n-epochs 1 --models cnn,nn1 --quiet --threads " + std::to_string(t) +
                                        args_choosing(p));
      ASSERT_EQ(o.code, 0) << o.err;
      ASSERT_NE(o.out.find("fingerprint"), std::string::npos) << o.out;
      tail[t - 1] = o.out.substr(o.out.find("fingerprint"));
    }
    EXPECT_EQ(tail[0], tail[1]);
  }
}

TEST(Protocol, FlagProblemsNameTheFlag) {
  RunFlags f;
  int threads = 1;
  f.split = "paper-sideways";
  try {
    validate_run(f, &threads);
    ADD_FAILURE() << "an unknown split was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--split 'paper-sideways': unknown split (expected paper-azimuth, paper-elevation, translation, rotation, scale, shear, affine)");
  }
  // A dataset too big to fit blames the count raised furthest above its default.
  f = RunFlags{};
  f.n_per_combo = "3000";
  f.n_train_views = "300";
  try {
    validate_run(f, &threads);
    ADD_FAILURE() << "13.5 million images were accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(),
                 "--n-per-combo '3000': the dataset (5 classes x 3 elevations x (300 training views x 3000 + 342 "
                 "evaluation views x 2) = 13510260 images) would exceed 2 million images");
  }
  f = RunFlags{};
  f.data = test::fixture_data("norb:");
  f.protocol["cameras"] = "third";
  try {
    validate_run(f, &threads);
    ADD_FAILURE() << "an unknown camera was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "--cameras 'third': expected both, first or second");
  }
}

// --data's help names every source a protocol reads ("norb:DIR" for a
// directory source), so a new source's registration shows in --help or fails here.
TEST(Protocol, DataHelpNamesEverySource) {
  const test::Outcome o = test::run("run --help");
  ASSERT_EQ(o.code, 0) << o.err;
  const size_t at = o.out.find("--data TEXT");
  ASSERT_NE(at, std::string::npos) << o.out;
  const std::string line = o.out.substr(at, o.out.find('\n', at) - at);
  for (const Protocol& p : protocol_registry()) {
    const std::string source = p.source;
    const std::string form = source.back() == ':' ? source + "DIR" : source;
    EXPECT_NE(line.find(form), std::string::npos) << form << " missing from: " << line;
  }
}

}  // namespace
}  // namespace vg
