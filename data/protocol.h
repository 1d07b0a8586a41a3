// Protocols: which views of a data source a model trains on (and is tested on
// as familiar), which it holds out, and how far each held-out view lies from
// the training ones along the protocol's held-out axis. The harness asks for a
// configuration's splits through this header only; it names no protocol.
//
// Adding a protocol is its own file plus one line in protocol_registry()
// (data/protocol.cpp); tests/test_protocol.cpp runs every registered protocol
// through the split-disjointness, determinism and distance tests.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "data/dataset.h"
#include "data/source.h"
#include "data/toy_cache.h"

namespace vg {

// The axis a protocol holds views out along, e.g. {"azimuth", "deg"}; a
// translation's would be {"shift", "px"}. Sweeps and runs report accuracy
// against positions along it (Split::axis) and their distance from the
// training views (Protocol::distance), in its unit.
struct HeldOutAxis {
  const char* name;
  const char* unit;
};

// A bad data flag: the flag (without "--"), its value, and why; the CLI
// prints it as one line and exits 2.
struct FlagError : std::invalid_argument {
  FlagError(std::string flag, std::string value, std::string why)
      : std::invalid_argument("--" + flag + " '" + value + "': " + why),
        flag(std::move(flag)), value(std::move(value)), why(std::move(why)) {}
  std::string flag, value, why;
};

// A flag a protocol declares and reads (the command line registers every
// protocol's; setting one while another protocol is chosen is an error).
struct DataFlag {
  const char* name;           // without "--"
  const char* default_value;  // as typed
  const char* help;
  // A sweep hashes the flag at every value but this one (nullptr: at every
  // value): for a flag added to a protocol after its sweeps were made, the
  // value they all had, so that they keep their hash. It stays that value
  // when the default moves on, so the new default's sweeps hash apart.
  const char* unhashed_value = nullptr;
  // A switch that changes how the data is made, never what (--no-cache):
  // typed without a value ("on" when given, default "off"), never hashed, and
  // no run changes with it.
  bool how_switch = false;
};

// The run flags as the user typed them, by name ("train-azimuths", "split"),
// as a protocol reads them: data/ needs none of the command line's types, and
// a number is read by the command line's one rule (its parse errors are the
// command line's own, naming the flag).
class FlagSource {
 public:
  virtual ~FlagSource() = default;
  virtual std::string value(const std::string& name) const = 0;
  // Set by the user: typed (even at its default value), or away from the command's default.
  virtual bool changed(const std::string& name) const = 0;
  virtual long long integer(const std::string& name, long long lo, long long hi) const = 0;
  virtual double real(const std::string& name, double lo, double hi) const = 0;  // lo closed
  // "A:B" in flag `name`, its count in flag `count_name` (or, given, `count`'s text).
  virtual AngleRange range(const std::string& name, const std::string& count_name,
                           const std::string* count = nullptr) const = 0;
  // "A:B" in flag `name`, lo <= A <= B <= hi.
  virtual std::pair<double, double> interval(const std::string& name, double lo, double hi) const = 0;
};

// The training set's size, and how it is made up (for an error message).
struct TrainingSize {
  long long images = 0;
  std::string text;  // e.g. "450 images = 5 classes x 6 views x 3 elevations x 5 per combination"
};

// Viewpoints as recorded: the values, and the arc that holds them (from
// the first value, circularly for azimuths, to `to` >= from; e.g. 300:400 for
// 300,320,340,0,20,40).
struct ViewList {
  double from = 0, to = 0;
  std::vector<double> values;
};
ViewList view_list(const AngleRange& r);
// `circular`: azimuths, whose arc may cross 0; else ascending elevations.
ViewList view_list(std::vector<double> values, bool circular);

// The training and held-out viewpoints of a configuration. An empty
// held-out elevation list means the training ones.
struct RecordedViews {
  ViewList train_azimuths, test_azimuths, train_elevations, test_elevations;
};

struct Protocol {
  const char* name = nullptr;    // unique, e.g. "azimuth-window", "norb-paper-elevation"
  const char* source = nullptr;  // the source it splits (data/source.h: Source::name)
  const char* split = nullptr;   // the --split value that chooses it, or nullptr (chosen by default_for)
  HeldOutAxis axis{};
  // Chosen without --split when this returns true (nullptr: never), e.g. by
  // the flags of `chosen_by` (which tests and docs use to choose it).
  bool (*default_for)(const FlagSource& flags) = nullptr;
  std::vector<std::pair<const char*, const char*>> chosen_by{};
  // Run flags it sets, as typed, before configure reads them (the paper's
  // presets); a user who also sets one of them is told of the conflict.
  std::vector<std::pair<const char*, const char*>> preset{};
  // Among its source's protocols, whether configured cfg is this one's
  // (protocol_of); nullptr: a preset, known by its views alone.
  bool (*holds)(const Protocol& self, const DataConfig& cfg) = nullptr;
  // Reads and validates the flags it owns into cfg; throws FlagError naming the first bad one.
  void (*configure)(const FlagSource& flags, DataConfig* cfg) = nullptr;
  // The held-out set's geometry against the training set (nullopt: sound).
  // `allow_touching_end`: a sweep's gap-0 window (data/dataset.h: check_geometry).
  std::optional<GeometryProblem> (*check)(const DataConfig& cfg, bool allow_touching_end) = nullptr;
  // The training set a configured cfg gives, known before it is made.
  TrainingSize (*training_size)(const DataConfig& cfg) = nullptr;
  // For the up-front memory check: the images and bytes the dataset of cfg
  // holds, and the flag to blame when it is too big (`why` says how).
  double (*images)(const DataConfig& cfg) = nullptr;
  double (*bytes)(const DataConfig& cfg) = nullptr;
  FlagError (*too_big)(const FlagSource& flags, const DataConfig& cfg, const std::string& why) = nullptr;
  // The dataset: its splits, each sample's position along the axis
  // (Split::axis), and the axis sweep (Dataset::axis_splits) at axis_values(cfg).
  Dataset (*make)(const DataConfig& cfg) = nullptr;
  // The positions along the axis the axis sweep holds, ascending (the circle's
  // azimuths, an elevation profile's elevations), known before the data is made.
  std::vector<double> (*axis_values)(const DataConfig& cfg) = nullptr;
  // Distance of axis position `value` (a sample's Split::axis) from the
  // training views of cfg along the axis, in the axis's unit.
  double (*distance)(const DataConfig& cfg, double value) = nullptr;
  // A sweep over the distance: cfg with its held-out set starting `distance`
  // (in the axis's unit) beyond the training set; `width`: --test-width, the
  // held-out set's extent where swept_flag is the flag it replaces. nullptr:
  // the held-out set is fixed (a sweep runs it once, as given).
  DataConfig (*at_distance)(const DataConfig& cfg, double distance, double width) = nullptr;
  // The run flag at_distance replaces (a sweep refuses it unless --gaps
  // given); nullptr: at_distance moves the flags' own held-out set, keeping
  // its extent (an elevation band keeps --test-elevations' width).
  const char* swept_flag = nullptr;
  // at_distance reads `width` (--test-width, the azimuth window's extent);
  // false: the held-out set keeps its own, and a sweep refuses --test-width.
  bool sweeps_width = false;
  // A sweep's --gaps when not given, in the axis's unit (nullptr: the
  // azimuth window's, 0,30,60,90,120): each gap's held-out set fits the
  // protocol's limits at its flags' defaults.
  const char* default_gaps = nullptr;
  // The sweep's gap of a configured cfg (cells.csv's true_gap: the held-out
  // set's distance from the training set, in the axis's unit), and the
  // held-out set as text ("60:120") for an error message.
  double (*sweep_gap)(const DataConfig& cfg) = nullptr;
  std::string (*heldout_text)(const DataConfig& cfg) = nullptr;
  // The lines a run's table opens with, after "seed S, E epochs; ", and the
  // run JSON's "data" object (nullptr: none; the synthetic data's readers expect none).
  std::string (*describe)(const DataConfig& cfg, const Dataset& d) = nullptr;
  nlohmann::json (*source_json)(const DataConfig& cfg) = nullptr;
  // The viewpoints a configured cfg trains on and holds out, as the run JSON
  // and a sweep's meta.json record them (what ran, not what the flags said):
  // nullptr reads them from cfg's ranges (flag_views); a source whose views
  // come from elsewhere (smallNORB's files) gives its own.
  RecordedViews (*views)(const DataConfig& cfg) = nullptr;
  // Flags this protocol alone declares (the command line registers them;
  // a sweep hashes them only when the protocol is chosen).
  std::vector<DataFlag> flags{};
  // The flag of `flags` that sets the images' side (the translation
  // protocol's --canvas), blamed when a model cannot take the data's
  // ImageShape (models/registry.h: ShapeError); nullptr: the side is fixed.
  const char* shape_flag = nullptr;
};

// --standardize, which smallNORB's, the toys' and the IDX sources' splits declare
// (protocol_norb.cpp): one flag, one rule (data/norb.h: standardize_pixels).
extern const DataFlag kStandardizeFlag;

// Every protocol's own flags, each name once.
const std::vector<DataFlag>& protocol_flags();

// Every protocol, in the order --split's messages list them.
const std::vector<Protocol>& protocol_registry();

// The protocol that --data, --split (and, without --split, the flags the
// protocols' default_for read) choose; throws FlagError for an unknown
// --data or --split, or a flag another source reads.
const Protocol& select_protocol(const FlagSource& flags);

// The protocol that made (or makes) cfg: make_dataset(cfg) is protocol_of(cfg).make(cfg).
// Among the protocols of cfg's source (data/source.h: source_of), a preset
// whose views cfg holds exactly (the rendered data at paper-azimuth's views is
// paper-azimuth's), else the one whose Protocol::holds says so.
const Protocol& protocol_of(const DataConfig& cfg);

// The views of cfg's ranges (train_azimuths, test_azimuths, elevations,
// test_elevations), and the views protocol_of(cfg) used (Protocol::views).
RecordedViews flag_views(const DataConfig& cfg);
RecordedViews recorded_views(const DataConfig& cfg);

// The name of class `cls` under cfg's data source, and every class's, in
// label order (image_shape(cfg).classes of them): the one place the run JSON,
// its table and the figures read them from.
const char* class_name(const DataConfig& cfg, int cls);
std::vector<std::string> class_names(const DataConfig& cfg);

// --shapes: seed or asym (FlagError otherwise).
ShapeSet parse_shapes(const std::string& v);

// Distance of every image of `s` (made from cfg) from the training views along p's axis.
std::vector<double> heldout_distances(const Protocol& p, const DataConfig& cfg, const Split& s);
// The distance of each of p.axis_values(cfg).
std::vector<double> axis_distances(const Protocol& p, const DataConfig& cfg);
// The distances of the viewing-angle axes: from the nearest training azimuth
// (circular) or elevation, in degrees.
double azimuth_distance(const DataConfig& cfg, double azimuth);
double elevation_distance(const DataConfig& cfg, double elevation);

// ---- The protocols, each defined in its own file (data/protocol_*.cpp).
Protocol azimuth_window_protocol();           // protocol_synthetic.cpp
Protocol elevation_extrapolation_protocol();  // protocol_synthetic.cpp
Protocol paper_azimuth_protocol();            // protocol_synthetic.cpp
Protocol paper_elevation_protocol();          // protocol_synthetic.cpp
Protocol norb_protocol(NorbSplitKind kind);   // protocol_norb.cpp
Protocol toys_protocol(NorbSplitKind kind);   // protocol_norb.cpp: the same on the toys (--data toys)
Protocol toys_window_protocol();              // protocol_toys_window.cpp: a swept azimuth window on the toys
// The records of a smallNORB-format source: the files in nc.dir, or the toys
// of the world nc.toys names (never the run's seed: smallNORB is one fixed set
// of photographs). `read`: the toys' sets whose pixels the caller reads, which
// come from the render cache (data/toy_cache.h) unless nc.cache is off; the
// others (and every set, for a caller that reads only the index) are drawn
// when read.
NorbData open_norb(const NorbConfig& nc, ToyCacheUse read = {});
// "smallNORB DIR", or the toys and their configuration, for a run's table.
std::string norb_source_text(const NorbConfig& nc);
// The run JSON's record of where the records came from: {"norb": DIR}, or {"toys": {...}}.
nlohmann::json norb_source_json(const NorbConfig& nc);
// The rendered shapes' training set, every class at every training view (protocol_synthetic.cpp).
TrainingSize synthetic_training_size(const DataConfig& cfg);
Protocol translation_protocol();              // protocol_translation.cpp
Protocol rotation_protocol();                 // protocol_affine.cpp
Protocol scale_protocol();                    // protocol_affine.cpp
Protocol shear_protocol();                    // protocol_affine.cpp
Protocol affine_protocol();                   // protocol_affnist.cpp
Protocol fashion_mnist_protocol();            // protocol_idx.cpp: Fashion-MNIST's standard split
Protocol idx_protocol();                      // protocol_idx.cpp: the same of any IDX set (--data idx:DIR)
// An IDX set's class names: Fashion-MNIST's, or the labels as numbers.
const char* idx_class_name(const IdxConfig& c, int cls);

}  // namespace vg
