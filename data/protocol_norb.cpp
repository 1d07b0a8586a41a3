// The protocols of smallNORB's files (--data norb:DIR): the paper's azimuth
// and elevation splits (Hinton, Sabour & Frosst 2018, section 5.1) and `full`
// (every viewpoint, none novel), read from the files' own index
// (data/norb.h; docs/smallnorb.md).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>

#include "data/norb_plane.h"
#include "data/protocol.h"

namespace vg {

namespace {

// An empty set would be scored 0.000 as if measured: refused instead.
// `views`: the split's training views, as the message says them.
NorbSplit checked(NorbSplit s, NorbSplitKind kind, const std::string& dir, const std::string& views) {
  const std::string split = dir + ": --split " + norb_split_name(kind) + ": ";
  if (s.train.empty())
    throw NorbError(split + "no training image lies at the split's training viewpoints" + views + ": the training set is empty");
  if (s.familiar.empty())
    throw NorbError(split + "no test image lies at the split's training viewpoints" + views + ": the familiar set is empty");
  if (s.novel.empty() && kind != NorbSplitKind::full)
    throw NorbError(split + "every test image lies at the split's training viewpoints" + views + ": the held-out set is empty");
  return s;
}

// The azimuth codes (10 deg each) of a window on the toys' 10-degree grid.
std::vector<int> azimuth_codes(const AngleRange& r) {
  std::vector<int> codes;
  for (double a : r.values()) codes.push_back(int(std::lround(a / norb_azimuth_deg(1))) % 36);
  return codes;
}

// The split of records `d` that cfg names: a paper split's, or the window split's from its windows.
NorbSplit split_of(const NorbData& d, const DataConfig& cfg) {
  const NorbConfig& nc = *cfg.norb;
  if (nc.split != NorbSplitKind::window) return norb_split_of(d, nc.split, nc.dir);
  std::ostringstream views;
  views << " (azimuths " << cfg.train_azimuths.from << ".." << cfg.train_azimuths.to << " deg, held out "
        << cfg.test_azimuths.from << ".." << cfg.test_azimuths.to << ")";
  return checked(norb_split_window(d.train.info(), d.test.info(), azimuth_codes(cfg.train_azimuths),
                                   azimuth_codes(cfg.test_azimuths)),
                 nc.split, nc.dir, views.str());
}

}  // namespace

NorbSplit norb_split_of(const NorbData& d, NorbSplitKind kind, const std::string& dir) {
  if (kind == NorbSplitKind::window) throw std::logic_error("norb_split_of: the window split needs its windows (split_of)");
  const std::vector<NorbInfo>&tr = d.train.info(), &te = d.test.info();
  NorbSplit s = kind == NorbSplitKind::azimuth     ? norb_split_azimuth(tr, te)
                : kind == NorbSplitKind::elevation ? norb_split_elevation(tr, te)
                                                   : norb_split_full(tr, te);
  return checked(std::move(s), kind, dir,
                 kind == NorbSplitKind::azimuth     ? " (azimuths 300..40 deg)"
                 : kind == NorbSplitKind::elevation ? " (elevations 30..40 deg)"
                                                    : "");
}

std::vector<double> norb_angles(const NorbSet& set, const std::vector<int>& idx, bool elevation) {
  std::vector<double> v;
  for (int i : idx) {
    const NorbInfo& r = set.info()[size_t(i)];
    v.push_back(elevation ? norb_elevation_deg(r.elevation) : norb_azimuth_deg(r.azimuth));
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

namespace {

// The centre crops (the paper's evaluation input) of set's images `idx`.
Split norb_crops(const NorbSet& set, const std::vector<int>& idx, const NorbPrep& prep) {
  Split s;
  s.channels = norb_channels(prep.cameras);
  const int n = int(idx.size());
  s.images.resize(size_t(n) * s.pixels());
  s.labels.resize(size_t(n));
  s.azimuth.resize(size_t(n));
  s.elevation.resize(size_t(n));
  std::string error;  // the first read that failed (an exception must not leave the parallel region)
#pragma omp parallel
  {
    std::vector<uint8_t> pair(kNorbPairBytes);
#pragma omp for schedule(static)
    for (int i = 0; i < n; ++i) {
      const int k = idx[size_t(i)];
      try {
        set.read_pair(k, pair.data());
      } catch (const NorbError& e) {
#pragma omp critical(norb_crops)
        if (error.empty()) error = e.what();
        continue;
      }
      norb_eval_sample(pair.data(), prep, s.images.data() + size_t(i) * s.pixels());
      const NorbInfo& info = set.info()[size_t(k)];
      s.labels[size_t(i)] = set.labels()[size_t(k)];
      s.azimuth[size_t(i)] = float(norb_azimuth_deg(info.azimuth));
      s.elevation[size_t(i)] = float(norb_elevation_deg(info.elevation));
    }
  }
  if (!error.empty()) throw NorbError(error);
  return s;
}

// Records `idx` of `set`, read once into memory (in order: a rendered set's
// readers then draw each view once for all its lightings).
NorbSet in_memory(const NorbSet& set, const std::vector<int>& idx) {
  const int n = int(idx.size());
  std::vector<uint8_t> pairs(size_t(n) * kNorbPairBytes);
  std::vector<int32_t> labels(static_cast<size_t>(n));
  std::vector<NorbInfo> info(static_cast<size_t>(n));
#pragma omp parallel for schedule(static)
  for (int i = 0; i < n; ++i) {
    set.read_pair(idx[size_t(i)], pairs.data() + size_t(i) * kNorbPairBytes);
    labels[size_t(i)] = set.labels()[size_t(idx[size_t(i)])];
    info[size_t(i)] = set.info()[size_t(idx[size_t(i)])];
  }
  return NorbSet::in_memory(std::move(labels), std::move(info), std::move(pairs), set.dat_name());
}

// smallNORB under one of the paper's splits: training images drawn afresh each
// epoch (random crops, jitter), evaluation on centre crops of the test set; the
// circle and the elevation profile are the test set itself.
Dataset make_norb_dataset(const DataConfig& cfg) {
  const NorbConfig& nc = *cfg.norb;
  // Pixels come from the sets read below: the validation set only for the stopping rules.
  const auto files = std::make_shared<const NorbData>(
      open_norb(nc, {.train = true, .test = true, .validation = cfg.n_val_per_combo > 0}));
  const NorbSplit sp = split_of(*files, cfg);
  Dataset d;
  d.views_from_test = true;
  d.train = norb_crops(files->train, sp.train, nc.prep);
  // The toys' training records drawn once, not every epoch (a drawing costs ~10
  // times what a training step spends on the image): the bytes they read the
  // same. From the render cache they are read from its file, as smallNORB's are.
  const bool draw_once = files->train.drawn_when_read();
  auto train = std::make_shared<const NorbSet>(draw_once ? in_memory(files->train, sp.train) : files->train);
  std::vector<int> train_idx = sp.train;
  if (draw_once) std::iota(train_idx.begin(), train_idx.end(), 0);
  d.train.draw = [train, idx = std::move(train_idx), prep = nc.prep, seed = cfg.seed](int i, uint64_t epoch, float* dst) {
    std::array<uint8_t, kNorbPairBytes> pair;  // on the stack: a training step allocates nothing
    train->read_pair(idx[size_t(i)], pair.data());
    Stream rng = norb_augment_stream(seed, epoch, uint64_t(i));
    norb_train_sample(pair.data(), prep, rng, dst);
  };
  d.familiar = norb_crops(files->test, sp.familiar, nc.prep);
  if (nc.split == NorbSplitKind::full) {
    d.heldout = d.familiar;  // no viewpoint is novel
    d.heldout_is_familiar = true;
  } else {
    d.heldout = norb_crops(files->test, sp.novel, nc.prep);
  }
  // The stopping rules' familiar validation set: toys of neither split at the
  // training views (the toys only; configure refuses the rules for files).
  if (cfg.n_val_per_combo > 0 && files->validation.size() > 0) {
    const NorbData v{files->validation, files->validation, {}};
    d.validation = norb_crops(files->validation, split_of(v, cfg).familiar, nc.prep);
  }
  const std::vector<int>& heldout = d.heldout_is_familiar ? sp.familiar : sp.novel;
  d.train_az = norb_angles(files->train, sp.train, false);
  d.elevations = norb_angles(files->train, sp.train, true);
  d.test_az = norb_angles(files->test, heldout, false);
  d.test_elevations = norb_angles(files->test, heldout, true);
  d.circle_az = circle_azimuths(cfg);
  d.gap_deg = azimuth_gap(d.train_az, d.test_az);
  d.elev_gap_deg = INFINITY;
  for (double t : d.test_elevations)
    for (double e : d.elevations) d.elev_gap_deg = std::min(d.elev_gap_deg, std::fabs(t - e));
  // The held-out axis: the elevation under paper-elevation, else the azimuth
  // (under `full`, along which nothing is held out).
  const bool by_elevation = nc.split == NorbSplitKind::elevation;
  d.axis_values = by_elevation ? profile_elevations(cfg) : d.circle_az;
  for (Split* s : {&d.train, &d.familiar, &d.heldout}) s->axis = by_elevation ? s->elevation : s->azimuth;
  return d;
}

// The run flags of the rendered data, which smallNORB's files replace.
const char* const kSyntheticFlags[] = {"train-azimuths", "test-azimuths", "n-train-views", "n-test-views",
                                       "elevations", "n-elev", "test-elevations", "n-test-elev", "shapes",
                                       "n-per-combo", "n-eval-per-combo", "noise"};

// The flags only smallNORB's protocols read (the command line registers them
// from here; harness/ names none).
const DataFlag kCameras{"cameras", "both", "With --data norb or toys: both (2 input channels), first or second"};
const DataFlag kBrightness{"brightness", "0", "With --data norb or toys: training brightness jitter, uniform in +-B (0..1)"};
const DataFlag kContrast{"contrast", "0", "With --data norb or toys: training contrast jitter, a factor uniform in 1 +- C (0..1)"};
// Added after sweeps of these protocols were made: hashed only away from the value those had.
const DataFlag kTrainCrops{"train-crops", "random",
                           "With --data norb or toys and their paper, full or window splits: random (the paper's 32x32 "
                           "crops of 48x48) or centre (as evaluation's: LeCun et al. 2004's baselines saw no jitter)",
                           /*unhashed_value=*/"random"};
}  // namespace

// Added after sweeps of these protocols were made: hashed only away from the value those had.
const DataFlag kStandardizeFlag{"standardize", "off",
                                "With --data norb or toys and their paper, full or window splits, or --data fashion-mnist "
                                "or idx and any of theirs: each image standardised (on: as google-research's capsule_em; "
                                "off: pixels in [0, 1], as the paper says)",
                                /*unhashed_value=*/"off"};

namespace {
const DataFlag& kStandardize = kStandardizeFlag;

// The toys' own flags (--data toys).
constexpr const char* kToysSource = "toys";
const DataFlag kToyInstancesFlag{"toy-instances", "5",
                             "With --data toys: toys per category in each split (training 0..N-1, test N..2N-1; 1..50)"};
const DataFlag kToyLightingsFlag{"toy-lightings", "6", "With --data toys: lightings per view, the first L of the six (1..6)"};
const DataFlag kStereoDeg{"stereo-deg", "2", "With --data toys: the cameras' baseline as the angle it subtends at the toy, degrees (0..20)"};
const DataFlag kProjection{"projection", "perspective", "With --data toys: perspective or orthographic"};
// Added after the toys' sweeps were made: hashed only away from the value those had, so they keep their hash.
const DataFlag kToyMinSizeFlag{"toy-min-size", "0.7",
                           "With --data toys: each toy's size uniform in [M, 1] (1: every toy the same size; 0.01..1)",
                           /*unhashed_value=*/"0.7"};
const DataFlag kToyScaleFlag{"toy-scale", "1",
                         "With --data toys: every toy's size times S (1: a toy of size 1 fills the central two thirds "
                         "of the frame, 1.5 all of it; 0.25..2)",
                         /*unhashed_value=*/"1"};
const DataFlag kToyVarietyFlag{"toy-variety", "wide",
                           "With --data toys: wide (every category's toys drawn from several body plans; the "
                           "calibrated setting) or narrow (one body plan per category: the toys' first; docs/toys.md)",
                           /*unhashed_value=*/"narrow"};
const DataFlag kToyLightsFlag{"toy-lights", "rig",
                              "With --data toys: where the six lights stand: rig (each within ~27 deg of the camera's "
                              "axis, as lamps beside the cameras; the calibrated setting) or mixed (from the corners, "
                              "above, the front and one raking side: the toys' first; docs/toys.md)",
                              /*unhashed_value=*/"mixed"};

const DataFlag kToySeedFlag{"toy-seed", "0",
                            "With --data toys: the world, the seed of the toys' pixel noise (0..2^53; independent of "
                            "--seed, as smallNORB's photographs are fixed)",
                            /*unhashed_value=*/"0"};
const DataFlag kNoCacheFlag{"no-cache", "off",
                            "With --data toys: draw the toys in memory, neither reading nor filling the render cache "
                            "($XDG_CACHE_HOME/viewgap, docs/toys.md); the same bytes either way",
                            /*unhashed_value=*/"off", /*how_switch=*/true};

// Every flag only the toys read.
const DataFlag kToyFlags[] = {kToyInstancesFlag, kToyLightingsFlag, kStereoDeg, kProjection, kToyMinSizeFlag,
                              kToyScaleFlag, kToyVarietyFlag, kToyLightsFlag, kToySeedFlag, kNoCacheFlag};

ToyConfig configure_toys(const FlagSource& f) {
  ToyConfig t;
  t.instances = int(f.integer(kToyInstancesFlag.name, 1, kToyMaxInstances));
  t.lightings = int(f.integer(kToyLightingsFlag.name, 1, kToyLightings));
  t.stereo_deg = f.real(kStereoDeg.name, 0, 20);
  const std::string projection = f.value(kProjection.name);
  if (projection != "perspective" && projection != "orthographic")
    throw FlagError(kProjection.name, projection, "expected perspective or orthographic");
  t.perspective = projection == "perspective";
  t.min_size = f.real(kToyMinSizeFlag.name, 0.01, 1);
  t.scale = f.real(kToyScaleFlag.name, 0.25, 2);
  const std::string variety = f.value(kToyVarietyFlag.name);
  if (variety != "narrow" && variety != "wide") throw FlagError(kToyVarietyFlag.name, variety, "expected narrow or wide");
  t.variety = variety == "wide" ? ToyVariety::wide : ToyVariety::narrow;
  const std::string lights = f.value(kToyLightsFlag.name);
  if (lights != "mixed" && lights != "rig") throw FlagError(kToyLightsFlag.name, lights, "expected mixed or rig");
  t.lights = lights == "rig" ? ToyLights::rig : ToyLights::mixed;
  t.seed = uint64_t(f.integer(kToySeedFlag.name, 0, 1ll << 53));
  return t;
}

}  // namespace

NorbData open_norb(const NorbConfig& nc, ToyCacheUse read) {
  if (!nc.toys) return norb_load_dir(nc.dir);
  return nc.cache ? toy_world(*nc.toys, read) : toy_norb_data(*nc.toys);
}

std::string norb_source_text(const NorbConfig& nc) {
  if (!nc.toys) return "smallNORB " + nc.dir;
  const ToyConfig& t = *nc.toys;
  std::ostringstream o;
  o << "toys (" << t.instances << " training and " << t.instances << " test toys per category, " << t.lightings
    << " lighting(s), " << (t.perspective ? "perspective" : "orthographic") << ", cameras " << t.stereo_deg
    << " deg apart";
  if (t.min_size != kToyMinSize || t.scale != 1) o << ", sizes " << t.min_size << "..1 x " << t.scale;
  if (t.variety == ToyVariety::wide) o << ", wide variety";
  if (t.lights == ToyLights::rig) o << ", rig lights";
  if (t.seed != 0) o << ", world " << t.seed;
  o << ")";
  return o.str();
}

nlohmann::json norb_source_json(const NorbConfig& nc) {
  if (!nc.toys) return {{"norb", nc.dir}};
  const ToyConfig& t = *nc.toys;
  nlohmann::json toys = {{"instances_per_split", t.instances},
                         {"lightings", t.lightings},
                         {"stereo_deg", t.stereo_deg},
                         {"projection", t.perspective ? "perspective" : "orthographic"},
                         {"min_size", t.min_size},
                         {"scale", t.scale},
                         {"variety", t.variety == ToyVariety::wide ? "wide" : "narrow"}};
  // Away from the value before these flags only: a checkpoint made before them keeps its configuration.
  if (t.lights == ToyLights::rig) toys["lights"] = "rig";
  if (t.seed != 0) toys["world_seed"] = t.seed;
  return {{"toys", toys}};
}

NorbConfig configure_norb_source(const FlagSource& f, DataConfig* d, bool window) {
  const std::string data = f.value("data");
  NorbConfig c;
  if (data == kToysSource) {
    c.dir = kToysSource;
    c.toys = configure_toys(f);
    const std::string no_cache = f.value(kNoCacheFlag.name);
    if (no_cache != "on" && no_cache != "off") throw FlagError(kNoCacheFlag.name, no_cache, "a switch: on when given");
    c.cache = no_cache == "off";
  } else {
    c.dir = data.substr(data.find(':') + 1);
    if (c.dir.empty()) throw FlagError("data", data, "expected norb:DIR (the directory of smallNORB's six files)");
  }
  for (const char* name : kSyntheticFlags)
    if (f.changed(name) && !(window && (name == std::string("train-azimuths") || name == std::string("test-azimuths"))))
      throw FlagError(name, f.value(name),
                      window ? "applies to --data synthetic only (the window split takes every 10 degrees of --train-azimuths and --test-azimuths)"
                             : "applies to --data synthetic only (smallNORB's viewpoints come from --split)");
  // The rendered data's fields keep their flags' defaults (unused: the run
  // JSON records the files' views, norb_views).
  d->train_azimuths = f.range("train-azimuths", "n-train-views");
  d->test_azimuths = f.range("test-azimuths", "n-test-views");
  d->elevations = f.range("elevations", "n-elev");
  d->n_per_combo = int(f.integer("n-per-combo", 1, 10000));
  d->n_eval_per_combo = int(f.integer("n-eval-per-combo", 1, 10000));
  const std::string cameras = f.value(kCameras.name);
  if (cameras == "both") c.prep.cameras = NorbCameras::both;
  else if (cameras == "first") c.prep.cameras = NorbCameras::first;
  else if (cameras == "second") c.prep.cameras = NorbCameras::second;
  else throw FlagError(kCameras.name, cameras, "expected both, first or second");
  c.prep.max_brightness = float(f.real(kBrightness.name, 0, 1));
  c.prep.max_contrast = float(f.real(kContrast.name, 0, 1));
  const std::string standardize = f.value(kStandardize.name);
  if (standardize != "on" && standardize != "off") throw FlagError(kStandardize.name, standardize, "expected on or off");
  c.prep.standardize = standardize == "on";
  const std::string crops = f.value(kTrainCrops.name);
  if (crops != "random" && crops != "centre") throw FlagError(kTrainCrops.name, crops, "expected random or centre");
  c.prep.centre_train_crops = crops == "centre";
  const std::string stop = f.value("stop-at-familiar"), match = f.value("match-familiar");
  const std::string validation = f.value("validation");
  if (!c.toys && (!stop.empty() || !match.empty() || validation == "on")) {
    const char* flag = !stop.empty() ? "stop-at-familiar" : !match.empty() ? "match-familiar" : "validation";
    throw FlagError(flag, f.value(flag), "needs a familiar validation split, which --data " + data + " does not make");
  }
  if (const std::string dump = f.value("dump"); !dump.empty())
    throw FlagError("dump", dump, "draws the synthetic data only (not --data " + data + ")");
  return c;
}

namespace {

// The split, cameras and jitter, and the files' index (read and checked now,
// so a bad file is a one-line error before any work).
template <NorbSplitKind kKind>
void configure_norb(const FlagSource& f, DataConfig* d) {
  const std::string data = f.value("data");
  NorbConfig c = configure_norb_source(f, d);
  c.split = kKind;
  try {
    const NorbData files = open_norb(c);
    const NorbSplit s = norb_split_of(files, c.split, c.dir);
    c.train_images = long(s.train.size());
    c.train_az = norb_angles(files.train, s.train, false);
    c.train_elev = norb_angles(files.train, s.train, true);
    // The gap along the split's held-out axis (the elevation under paper-elevation).
    if (s.novel.empty()) {
      c.gap_deg = 0;
    } else if (c.split == NorbSplitKind::elevation) {
      c.gap_deg = INFINITY;
      for (double t : norb_angles(files.test, s.novel, true))
        for (double e : c.train_elev) c.gap_deg = std::min(c.gap_deg, std::fabs(t - e));
    } else {
      c.gap_deg = azimuth_gap(c.train_az, norb_angles(files.test, s.novel, false));
    }
    // In memory: centre crops of the training and test images (the held-out split
    // again under `full`), channels x 32 x 32 floats each.
    c.images_in_memory = long(s.train.size() + s.familiar.size() + s.novel.size()) +
                         (c.split == NorbSplitKind::full ? long(s.familiar.size()) : 0);
  } catch (const NorbError& e) {
    throw FlagError("data", data, e.what());
  }
  d->norb = c;
}

TrainingSize training_size(const DataConfig& d) {
  return {d.norb->train_images, std::to_string(d.norb->train_images) + " images in the split"};
}

double bytes(const DataConfig& d) {
  // The toys' training records are held as pairs besides when drawn (make_norb_dataset;
  // read from the render cache they are not, but it may be off or unwritable).
  const double pairs = d.norb->toys ? double(d.norb->train_images) * kNorbPairBytes : 0;
  return double(d.norb->images_in_memory) * (norb_channels(d.norb->prep.cameras) * kImagePixels * 4 + 12) + pairs;
}

double images(const DataConfig& d) { return double(d.norb->images_in_memory); }

// The files are what they are: --data is to blame.
FlagError too_big(const FlagSource& f, const DataConfig& d, const std::string& why) {
  return FlagError("data", f.value("data"),
                   "the dataset (" + std::to_string(d.norb->images_in_memory) + " images of " +
                       std::to_string(norb_channels(d.norb->prep.cameras)) + " x 32 x 32 floats) " + why);
}

std::optional<GeometryProblem> no_problem(const DataConfig&, bool) {
  return std::nullopt;  // the split's views come from the files' index, checked by norb_split_of
}

double no_distance(const DataConfig&, double) { return 0; }  // `full`: every view is a training view

double split_gap(const DataConfig& d) { return d.norb->gap_deg; }

// "300,320,340,0,20,40": degrees as a comma list.
std::string degrees(const std::vector<double>& v) {
  std::ostringstream o;
  for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  return o.str();
}

std::string describe(const DataConfig& cfg, const Dataset& d) {
  std::ostringstream o;
  o << norb_source_text(*cfg.norb) << ", split " << norb_split_name(cfg.norb->split) << ", cameras "
    << norb_cameras_name(cfg.norb->prep.cameras) << (cfg.norb->prep.standardize ? ", standardised" : "")
    << (cfg.norb->prep.centre_train_crops ? ", centre training crops" : "") << "\n"
    << d.train.size() << " training images at azimuths " << degrees(d.train_az) << ", elevations "
    << degrees(d.elevations) << "; " << d.heldout.size() << " held-out at azimuths " << degrees(d.test_az)
    << ", elevations " << degrees(d.test_elevations) << "; true gap " << d.gap_deg << " deg (elevation "
    << d.elev_gap_deg << ")\n";
  return o.str();
}

nlohmann::json source_json(const DataConfig& cfg) {
  const NorbConfig& n = *cfg.norb;
  nlohmann::json j = norb_source_json(n);
  j.update({{"split", norb_split_name(n.split)},
          {"cameras", norb_cameras_name(n.prep.cameras)},
          {"brightness", n.prep.max_brightness},
          {"contrast", n.prep.max_contrast},
          {"standardize", n.prep.standardize},
          {"train_crops", n.prep.centre_train_crops ? "centre" : "random"}});
  return j;
}

// The split's views, read from the files' index again (cheap: the images stay on disk).
RecordedViews norb_views(const DataConfig& cfg) {
  const NorbConfig& n = *cfg.norb;
  const NorbData files = open_norb(n);
  const NorbSplit s = split_of(files, cfg);
  const std::vector<int>& heldout = n.split == NorbSplitKind::full ? s.familiar : s.novel;
  RecordedViews v{view_list(norb_angles(files.train, s.train, false), true),
                  view_list(norb_angles(files.test, heldout, false), true),
                  view_list(norb_angles(files.train, s.train, true), false), {}};
  const ViewList held_elev = view_list(norb_angles(files.test, heldout, true), false);
  if (held_elev.values != v.train_elevations.values) v.test_elevations = held_elev;
  return v;
}

bool always(const FlagSource&) { return true; }

}  // namespace

Protocol norb_protocol(NorbSplitKind kind) {
  Protocol p{.name = kind == NorbSplitKind::azimuth     ? "norb-paper-azimuth"
                     : kind == NorbSplitKind::elevation ? "norb-paper-elevation"
                                                        : "norb-full",
             .source = "norb:",
             .split = norb_split_name(kind),
             .axis = kind == NorbSplitKind::elevation ? HeldOutAxis{"elevation", "deg"}
                     : kind == NorbSplitKind::full      ? HeldOutAxis{"none", "deg"}
                                                        : HeldOutAxis{"azimuth", "deg"}};
  if (kind == NorbSplitKind::azimuth) p.default_for = always;  // --split's default with --data norb
  p.holds = [](const Protocol& self, const DataConfig& c) { return !c.plane && norb_split_name(c.norb->split) == std::string(self.split); };
  p.configure = kind == NorbSplitKind::azimuth     ? configure_norb<NorbSplitKind::azimuth>
                : kind == NorbSplitKind::elevation ? configure_norb<NorbSplitKind::elevation>
                                                   : configure_norb<NorbSplitKind::full>;
  p.check = no_problem;
  p.training_size = training_size;
  p.images = images;
  p.bytes = bytes;
  p.too_big = too_big;
  p.make = make_norb_dataset;
  p.axis_values = kind == NorbSplitKind::elevation ? profile_elevations : circle_azimuths;
  p.distance = kind == NorbSplitKind::elevation ? elevation_distance
               : kind == NorbSplitKind::full      ? no_distance
                                                  : azimuth_distance;
  p.sweep_gap = split_gap;
  p.describe = describe;
  p.source_json = source_json;
  p.views = norb_views;
  p.flags = {kCameras, kBrightness, kContrast, kStandardize, kTrainCrops};
  return p;
}

// The same splits of the toys' records: the protocol is smallNORB's, only the
// records are drawn instead of read.
Protocol toys_protocol(NorbSplitKind kind) {
  Protocol p = norb_protocol(kind);
  p.name = kind == NorbSplitKind::azimuth     ? "toys-paper-azimuth"
           : kind == NorbSplitKind::elevation ? "toys-paper-elevation"
           : kind == NorbSplitKind::window    ? "toys-azimuth-window"
                                              : "toys-full";
  p.source = kToysSource;
  for (const DataFlag& f : kToyFlags) p.flags.push_back(f);
  return p;
}

Source norb_source() {
  return {.name = "norb:",
          .help = "smallNORB's six NYU files in DIR",
          .viewpoints = true,
          .flags = {"data", kCameras.name, kBrightness.name, kContrast.name},
          .holds = [](const DataConfig& c) { return c.norb && !c.norb->toys; },
          // The paper's crops, or a protocol's canvas (data/norb_plane.h).
          .shape = [](const DataConfig& c) {
            return ImageShape{norb_channels(c.norb->prep.cameras), c.plane ? c.plane->canvas : kImageSide, kNumClasses};
          },
          // The files carry smallNORB's class numbers (animal, human, plane, truck, car).
          .class_name = [](const DataConfig&, int cls) { return kNorbClassNames[cls]; },
          .data_text = [](const DataConfig& c) { return "norb:" + c.norb->dir; }};
}

// smallNORB's records drawn instead of read: its shape and classes, and the toys' own flags.
Source toys_source() {
  Source s = norb_source();
  s.name = kToysSource;
  s.help = "drawn in smallNORB's format";
  s.version = kToyGeneratorVersion;
  for (const DataFlag& f : kToyFlags) s.flags.push_back(f.name);
  s.holds = [](const DataConfig& c) { return c.norb && c.norb->toys; };
  s.data_text = [](const DataConfig&) { return std::string(kToysSource); };
  return s;
}

}  // namespace vg
