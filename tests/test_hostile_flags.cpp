// Hostile values for every flag, found from the flag tables, not listed by
// hand: every option each command's --help lists (the run flags, the models'
// options, the protocols' own and each command's) takes empty, NaN, infinite,
// negative, overflowing and junk-trailed values, and a protocol's flag is
// tried under every protocol that does not declare it. A flag registered
// later joins these tests by being registered. The promise for each: exit 2,
// one line naming the flag, before any work, nothing written, no hang.
//
// And the rule that makes the ignored-flag refusal sound: a flag a protocol
// declares changes what a run under that protocol computes.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/protocol.h"
#include "harness/run_flags.h"
#include "models/registry.h"
#include "tests/protocol_util.h"
#include "tests/test_util.h"

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::lines;
using test::Outcome;

constexpr const char* kNoHang = "timeout 60";

std::string scratch(const std::string& name) {
  const std::string d = test::temp_dir() + "viewgap_hostile_" + name + "." + std::to_string(getpid());
  fs::remove_all(d);
  return d;
}

// The options of `command` as its --help lists them, each with whether it
// takes a value (a flag such as --quiet takes none).
// One --help line's option, "  [-x,]--name[,-x] [TYPE]": its name and whether
// a value type follows (TEXT, INT, FLOAT, UINT, or a NAME:SET); nullopt for a
// line that lists no option. (No std::regex: GCC 12 warns inside it under ASan.)
std::optional<std::pair<std::string, bool>> option_of(const std::string& line) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  auto name_char = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'; };
  size_t i = 0;
  while (i < line.size() && space(line[i])) ++i;
  if (i == 0) return std::nullopt;
  if (i + 2 < line.size() && line[i] == '-' && line[i + 1] != '-' && line[i + 2] == ',') i += 3;  // "-q,"
  if (line.compare(i, 2, "--") != 0) return std::nullopt;
  size_t j = i += 2;
  while (j < line.size() && name_char(line[j])) ++j;
  if (j == i) return std::nullopt;
  const std::string name = line.substr(i, j - i);
  if (j + 2 < line.size() && line.compare(j, 2, ",-") == 0) j += 3;  // ",-q"
  size_t k = j;
  while (k < line.size() && space(line[k])) ++k;
  bool typed = false;
  if (k > j && k < line.size()) {
    const std::string token = line.substr(k, line.find_first_of(" \t", k) - k);
    for (const char* t : {"TEXT", "INT", "FLOAT", "UINT"}) typed = typed || token.rfind(t, 0) == 0;
    typed = typed || token.find(':') != std::string::npos;
  }
  return std::pair{name, typed};
}

std::map<std::string, bool> help_options(const std::string& command) {
  const Outcome o = test::run(command + " --help");
  EXPECT_EQ(o.code, 0) << o.err;
  std::map<std::string, bool> out;
  std::istringstream in(o.out);
  for (std::string line; std::getline(in, line);)
    if (const auto option = option_of(line); option && option->first != "help") out[option->first] = option->second;
  return out;
}

// Flags that name files or directories: any text is a name, so only an empty
// one is bad input (tests/test_faults.cpp tries the kinds of file).
const std::set<std::string> kPathFlags = {"out", "out-json", "dump", "trace", "model-file"};

// The command line that chooses protocol p, as name -> value (toys at their smallest).
std::map<std::string, std::string> choosing(const Protocol& p) {
  std::map<std::string, std::string> f;
  const std::string source = p.source;
  f["data"] = test::fixture_data(source);
  if (p.split != nullptr) f["split"] = p.split;
  for (const auto& [flag, value] : p.chosen_by) f[flag] = value;
  if (source == "toys") f["toy-instances"] = "1", f["toy-lightings"] = "1";
  return f;
}

std::string args(const std::map<std::string, std::string>& flags) {
  std::string s;
  for (const auto& [name, value] : flags) s += " '--" + name + "=" + value + "'";
  return s;
}

// A model of the registry that reads option `name`, by a name --models
// accepts ("cnn" for the numbered "cnnN"); "" for none.
std::string reader_of(const std::string& name) {
  for (const ModelEntry& e : model_registry())
    for (const ModelOption* o : e.options)
      if (name == o->name) {
        std::string n = e.name;
        if (n.size() > 1 && n.back() == 'N') n.pop_back();
        return n;
      }
  return "";
}

// A protocol that declares `name`, and its flags.
const Protocol* declaring(const std::string& name) {
  for (const Protocol& p : protocol_registry())
    for (const DataFlag& d : p.flags)
      if (name == d.name) return &p;
  return nullptr;
}

void expect_refused(const std::string& command, const std::string& flag, const std::string& value,
                    const std::string& context, const std::string& written) {
  const std::string cmd = command + context + " '--" + flag + "=" + value + "'";
  const Outcome o = test::run(cmd, kNoHang);
  EXPECT_EQ(o.code, 2) << cmd << "\n" << o.err;
  EXPECT_EQ(lines(o.err), 1) << cmd << "\n" << o.err;
  EXPECT_NE(o.err.find("--" + flag), std::string::npos) << cmd << "\n" << o.err;
  EXPECT_EQ(o.out, "") << cmd;
  if (!written.empty()) {
    EXPECT_FALSE(fs::exists(written)) << cmd << ": wrote " << written;
  }
}

// The values no flag that is not a file's name accepts.
const char* const kHostile[] = {"", "nan", "inf", "-1", "99999999999999999999", "1e999", "1x", "-inf"};

// Every value-taking option of `command` x every hostile value. `base`: what
// the command needs besides (sweep's --out); `written`: what must not appear.
void every_option_refuses_hostile_values(const std::string& command, const std::string& base, const std::string& written) {
  const std::map<std::string, bool> options = help_options(command);
  ASSERT_GT(options.size(), 3u) << command << ": --help listed too few options";
  int tried = 0;
  for (const auto& [flag, takes_value] : options) {
    if (!takes_value) continue;
    if (kPathFlags.count(flag) > 0 && base.find("--" + flag + " ") != std::string::npos) continue;
    // Each where it is read: a protocol's flag under a protocol that declares
    // it, a model option with a model that reads it (else the refusal would
    // be that it is ignored, and the value never judged).
    std::string context = base;
    if (const Protocol* p = declaring(flag)) {
      std::map<std::string, std::string> f = choosing(*p);
      f.erase(flag);
      context += args(f);
    }
    if (const std::string m = reader_of(flag); !m.empty())
      context += (command == "profile" ? " --model " : " --models ") + m;
    for (const char* v : kHostile) {
      if (kPathFlags.count(flag) > 0 && *v != '\0') continue;  // any other text names a file
      SCOPED_TRACE(command + " --" + flag + "=" + v);
      expect_refused(command, flag, v, context, written);
      ++tried;
    }
  }
  EXPECT_GT(tried, 3 * int(std::size(kHostile))) << command;
}

TEST(HostileFlags, EveryRunOptionRefusesEachHostileValue) {
  const std::string json = scratch("run") + ".json";
  every_option_refuses_hostile_values("run --quiet", " --out-json " + json, json);
}

// eval's flags are run's data flags and its own, judged with a model file of
// the default data's images (exit 2 naming the flag, not the file).
TEST(HostileFlags, EveryEvalOptionRefusesEachHostileValue) {
  const std::string dir = scratch("eval");
  fs::create_directories(dir);
  const std::string model = dir + "/m.vgm", json = dir + "/e.json";
  ASSERT_EQ(test::run("run --quiet --models linear --n-epochs 1 --save-model " + model).code, 0);
  every_option_refuses_hostile_values("eval --quiet --model-file " + model, " --out-json " + json, json);
}

TEST(HostileFlags, EverySweepOptionRefusesEachHostileValue) {
  const std::string dir = scratch("sweep");
  every_option_refuses_hostile_values("sweep --quiet", " --out " + dir, dir);
}

TEST(HostileFlags, EveryProfileOptionRefusesEachHostileValue) {
  const std::string csv = scratch("profile") + ".csv";
  every_option_refuses_hostile_values("profile", " --out " + csv, csv);
}

TEST(HostileFlags, EveryExportOptionRefusesEachHostileValue) {
  const std::string dir = scratch("export");
  every_option_refuses_hostile_values("export-norb " + dir + " --quiet", "", dir);
}

// A protocol's flag under a protocol that does not declare it would be
// ignored: refused even at its default value, naming the flag and where it
// applies, for every protocol and every flag of another.
TEST(HostileFlags, AProtocolsFlagUnderAnotherProtocolIsRefused) {
  const std::string json = scratch("other") + ".json";
  for (const Protocol& p : protocol_registry()) {
    for (const DataFlag& d : protocol_flags()) {
      const bool declared = std::any_of(p.flags.begin(), p.flags.end(), [&](const DataFlag& x) { return x.name == std::string(d.name); });
      std::map<std::string, std::string> f = choosing(p);
      if (declared || f.count(d.name) > 0) continue;
      SCOPED_TRACE(std::string(p.name) + " --" + d.name);
      // A switch takes no value: given, it is on.
      const std::string given = d.how_switch ? " --" + std::string(d.name) : " '--" + std::string(d.name) + "=" + d.default_value + "'";
      const std::string cmd = "run --quiet --out-json " + json + args(f) + given;
      const Outcome o = test::run(cmd, kNoHang);
      EXPECT_EQ(o.code, 2) << cmd << "\n" << o.err;
      EXPECT_EQ(lines(o.err), 1) << o.err;
      EXPECT_NE(o.err.find("--" + std::string(d.name) + " '" + (d.how_switch ? "on" : d.default_value) + "': applies"),
                std::string::npos) << o.err;
      EXPECT_FALSE(fs::exists(json));
    }
  }
}

// A value away from each protocol flag's default that every protocol
// declaring it takes. A flag missing here fails the test below: registering
// a protocol flag means saying which value shows that it acts.
const std::map<std::string, std::string> kAwayFromDefault = {
    {"cameras", "first"},      {"brightness", "0.3"},     {"contrast", "0.3"},         {"standardize", "on"},
    {"toy-instances", "2"},    {"toy-lightings", "2"},    {"stereo-deg", "6"},         {"projection", "orthographic"},
    {"toy-min-size", "1"},     {"toy-scale", "1.5"},       {"toy-variety", "narrow"},  {"train-crops", "centre"},
    {"toy-seed", "1"},         {"toy-lights", "mixed"},
    {"train-shift", "1"},      {"test-shifts", "4:7"},    {"n-test-shifts", "2"},      {"canvas", "40"},
    {"train-rotation", "10"},  {"test-rotations", "40:90"}, {"n-test-rotations", "2"}, {"train-scale", "1.1"},
    {"test-scales", "1.3:1.7"}, {"n-test-scales", "2"},   {"train-shear", "0.1"},      {"test-shears", "0.3:0.6"},
    {"n-test-shears", "2"},    {"train-affine", "0.5"},   {"test-affine", "1.5:2"},    {"n-test-affine", "2"},
};

std::string fingerprint(const std::string& cmd) {
  const Outcome o = test::run(cmd, kNoHang);
  EXPECT_EQ(o.code, 0) << cmd << "\n" << o.err;
  const size_t at = o.out.find("fingerprint ");
  return at == std::string::npos ? "" : o.out.substr(at, 28);
}

// A flag a protocol declares is accepted under it, so it must act there: set
// away from its default it changes the run (the fingerprint hashes every
// step's loss and every accuracy). A declared flag that did nothing would be
// ignored silently, which the refusal of undeclared flags exists to prevent.
TEST(HostileFlags, EveryFlagAProtocolDeclaresChangesItsRun) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    if (!test::made_in_tests(p)) continue;
    const std::map<std::string, std::string> base = choosing(p);
    // linear sees every change to the training images in its losses, nn1
    // every change to the held-out ones in its accuracy.
    const std::string run = "run --quiet --n-epochs 1 --models linear,nn1";
    const std::string plain = fingerprint(run + args(base));
    ASSERT_NE(plain, "");
    for (const DataFlag& d : p.flags) {
      SCOPED_TRACE(d.name);
      // A switch of how the data is made (--no-cache) acts without changing the run.
      if (d.how_switch) {
        EXPECT_EQ(fingerprint(run + args(base) + " --" + d.name), plain) << "--" << d.name << " changed the run";
        continue;
      }
      const auto away = kAwayFromDefault.find(d.name);
      if (away == kAwayFromDefault.end()) {
        ADD_FAILURE() << "--" << d.name << " has no value in kAwayFromDefault";
        continue;
      }
      std::map<std::string, std::string> f = base;
      f[d.name] = away->second;
      EXPECT_NE(fingerprint(run + args(f)), plain) << "--" << d.name << " " << away->second << " changed nothing";
    }
  }
}

}  // namespace
}  // namespace vg
