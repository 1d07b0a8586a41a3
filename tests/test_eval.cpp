// `viewgap eval` (harness/eval.h, docs/checkpoints.md): a saved model scores on
// its training run's own data what the run reported, bit for bit (a model file
// or a checkpoint, on one thread or two); it evaluates on another protocol of
// its image shape; and a file it cannot use, or flags it does not take, are
// one line and exit 2 before any work.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "harness/checkpoint.h"
#include "tests/test_util.h"

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::slurp;

std::string scratch(const std::string& name) { return test::fresh_dir("eval/" + name); }

// 30 training images, 15 of each test split: a fraction of a second a run.
const std::string kData = " --n-per-combo 1 --n-elev 1 --elevations 30:30 --n-eval-per-combo 1 --quiet";
const std::string kTraining = " --n-epochs 1 --batch-size 10";

// Both CRC-32s made good again after an edit (docs/checkpoints.md's layout).
void reseal(std::string& b) {
  auto crc = [&](size_t n) { return uint32_t(crc32(0, reinterpret_cast<const Bytef*>(b.data()), uInt(n))); };
  const uint32_t head = crc(28);
  std::memcpy(b.data() + 28, &head, 4);
  const uint32_t all = crc(b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &all, 4);
}

nlohmann::json json_of(const std::string& path) { return nlohmann::json::parse(slurp(path)); }

// What a model's evaluation reports: equal as doubles, key by key.
void expect_same_scores(const nlohmann::json& run, const nlohmann::json& eval, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(run["models"].size(), 1u);
  ASSERT_EQ(eval["models"].size(), 1u);
  const nlohmann::json& a = run["models"][0];
  const nlohmann::json& b = eval["models"][0];
  EXPECT_EQ(a["familiar"].get<double>(), b["familiar"].get<double>());
  EXPECT_EQ(a["heldout"].get<double>(), b["heldout"].get<double>());
  EXPECT_EQ(a["drop"].get<double>(), b["drop"].get<double>());
  for (const char* key : {"name", "options", "n_params", "heldout_per_class", "axis_accuracy", "circle_accuracy",
                          "class_activations", "validation"})
    EXPECT_EQ(a[key], b[key]) << key;
  EXPECT_EQ(run["dataset"], eval["dataset"]);
}

// Trains `model` (`run --save-model`) and evaluates the file on the same
// data: the same scores, on one thread and on two.
void expect_agreement(const std::string& model) {
  const std::string dir = scratch("agree-" + model);
  const std::string file = dir + model + ".vgm";
  const test::Outcome r = test::run("run --seed 3 --models " + model + kData + kTraining + " --out-json " + dir +
                                    "run.json --save-model " + file);
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string threads : {"1", "2"}) {
    const std::string out = dir + "eval" + threads + ".json";
    const test::Outcome e =
        test::run("eval --seed 3 --model-file " + file + kData + " --threads " + threads + " --out-json " + out);
    ASSERT_EQ(e.code, 0) << e.err;
    EXPECT_EQ(e.err, "");
    expect_same_scores(json_of(dir + "run.json"), json_of(out), model + " on " + threads + " thread(s)");
    // The table is the run's, its first line naming the file.
    EXPECT_EQ(e.out.rfind(model + " from " + file + " (a model file); seed 3; ", 0), 0u) << e.out;
    const nlohmann::json j = json_of(out);
    EXPECT_EQ(j["kind"], "viewgap-eval");
    EXPECT_EQ(j["model_file"]["path"], file);
    const Checkpoint c = read_checkpoint(file);
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(c.config_hash));
    EXPECT_EQ(j["model_file"]["config_hash"], hash);
    EXPECT_EQ(j["model_file"]["config"], nlohmann::json::parse(c.config));
    EXPECT_TRUE(j["model_file"]["checkpoint"].is_null());
    EXPECT_TRUE(j["config"]["n_epochs"].is_null());
    EXPECT_TRUE(j["models"][0]["lr"].is_null());
  }
}

// Every model the registry trains (nn1, fit in one pass, has no model file).
class EvalEveryModel : public ::testing::TestWithParam<std::string> {};
TEST_P(EvalEveryModel, ScoresWhatItsRunReported) { expect_agreement(GetParam()); }
INSTANTIATE_TEST_SUITE_P(Registry, EvalEveryModel, ::testing::ValuesIn(test::registered_models(true)),
                         test::model_test_name);

// A checkpoint (here: the run's model file with Adam's state and a training's
// progress added) is evaluated as its weights stand; the JSON says where its
// training stood.
TEST(Eval, ACheckpointIsEvaluatedAsItsWeightsStand) {
  const std::string dir = scratch("checkpoint");
  const std::string file = dir + "cnn.vgm", ckpt = dir + "cnn.ckpt";
  ASSERT_EQ(test::run("run --seed 2 --models cnn" + kData + kTraining + " --out-json " + dir + "run.json --save-model " + file).code, 0);
  Checkpoint c = read_checkpoint(file);
  AdamState adam;
  adam.step = 3;
  adam.m.assign(c.weights.size(), 0.f);
  adam.v.assign(c.weights.size(), 0.f);
  c.adam = adam;
  TrainingProgress g;
  g.seed = 2, g.steps_per_epoch = 3, g.total_steps = 3, g.step = 3, g.done = true;
  g.step_loss = {1, 1, 1};
  g.history = {{EpochRecord{1, 1, 0.5, 0.5, 0.1, {}}}};
  c.progress = g;
  write_checkpoint(ckpt, c);
  const test::Outcome e = test::run("eval --seed 2 --model-file " + ckpt + kData + " --out-json " + dir + "eval.json");
  ASSERT_EQ(e.code, 0) << e.err;
  EXPECT_NE(e.out.find("(a checkpoint at step 3 of 3)"), std::string::npos) << e.out;
  const nlohmann::json j = json_of(dir + "eval.json");
  expect_same_scores(json_of(dir + "run.json"), j, "the checkpoint");
  EXPECT_EQ(j["model_file"]["checkpoint"], (nlohmann::json{{"step", 3}, {"total_steps", 3}, {"done", true}}));
  EXPECT_EQ(j["models"][0]["steps"], 3);
}

// A training under a stopping rule had a validation split: eval, which takes
// no stopping rule, makes it too and scores what the run did on it.
TEST(Eval, TheValidationSplitOfAStoppingRuleToo) {
  const std::string dir = scratch("validation");
  const std::string file = dir + "cnn.vgm";
  ASSERT_EQ(test::run("run --models cnn --stop-at-familiar 0.9" + kData + kTraining + " --out-json " + dir +
                      "run.json --save-model " + file).code, 0);
  ASSERT_EQ(test::run("eval --model-file " + file + kData + " --out-json " + dir + "eval.json").code, 0);
  const nlohmann::json run = json_of(dir + "run.json"), eval = json_of(dir + "eval.json");
  ASSERT_TRUE(run["models"][0]["validation"].is_number());
  expect_same_scores(run, eval, "under a stopping rule");
}

// Trained on the paper's azimuth split, evaluated on its elevation split (the
// same 32 x 32 images): the held-out set is the elevation split's.
TEST(Eval, AnotherProtocolOfTheSameShape) {
  const std::string dir = scratch("protocol");
  const std::string file = dir + "cnn.vgm";
  const std::string data = " --n-per-combo 1 --n-eval-per-combo 1 --quiet";
  ASSERT_EQ(test::run("run --split paper-azimuth --models cnn" + data + kTraining + " --save-model " + file).code, 0);
  const test::Outcome e = test::run("eval --split paper-elevation --model-file " + file + data + " --out-json " + dir + "e.json");
  ASSERT_EQ(e.code, 0) << e.err;
  const nlohmann::json j = json_of(dir + "e.json");
  EXPECT_EQ(j["config"]["protocol"], "paper-elevation");
  EXPECT_EQ(j["dataset"]["axis"]["name"], "elevation");
  EXPECT_EQ(j["dataset"]["sizes"]["heldout"], 5 * 18 * 6);
  const double heldout = j["models"][0]["heldout"].get<double>();
  EXPECT_GE(heldout, 0.0);
  EXPECT_LE(heldout, 1.0);
  EXPECT_EQ(j["models"][0]["axis_accuracy"].size(), j["dataset"]["axis"]["values"].size());
}

// A refusal: exit 2, one line naming --model-file, the file and `why`; nothing on stdout.
void expect_refused(const std::string& args, const std::string& value, const std::string& why) {
  SCOPED_TRACE(args);
  const test::Outcome o = test::run("eval" + args, "timeout 60");
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(o.err.rfind("viewgap eval: error: --model-file '" + value + "': ", 0), 0u) << o.err;
  EXPECT_NE(o.err.find(why), std::string::npos) << o.err;
  EXPECT_EQ(test::lines(o.err), 1) << o.err;
  EXPECT_EQ(o.out, "");
}

TEST(Eval, AFileItCannotUseIsOneLineExitTwo) {
  const std::string dir = scratch("bad");
  const std::string good = dir + "good.vgm";
  ASSERT_EQ(test::run("run --models linear" + kData + kTraining + " --save-model " + good).code, 0);
  const std::string bytes = slurp(good);
  auto put = [&](const std::string& path, const std::string& b) { std::ofstream(path, std::ios::binary) << b; };
  put(dir + "cut.vgm", bytes.substr(0, bytes.size() / 2));
  expect_refused(" --model-file " + dir + "cut.vgm" + kData, dir + "cut.vgm",
                 "truncated: " + std::to_string(bytes.size() / 2) + " of the " + std::to_string(bytes.size()) + " bytes");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x20;
  put(dir + "flipped.vgm", flipped);
  expect_refused(" --model-file " + dir + "flipped.vgm" + kData, dir + "flipped.vgm", "corrupted: the CRC-32 of its contents");
  std::string version = bytes;
  version[8] = 2;
  put(dir + "damaged.vgm", version);  // the preamble's CRC-32 no longer matches: damaged, not newer
  expect_refused(" --model-file " + dir + "damaged.vgm" + kData, dir + "damaged.vgm", "corrupted: the preamble's CRC-32");
  reseal(version);
  put(dir + "version.vgm", version);
  expect_refused(" --model-file " + dir + "version.vgm" + kData, dir + "version.vgm",
                 "format version 2; this viewgap reads version 1");
  put(dir + "text.vgm", "hello\n");
  expect_refused(" --model-file " + dir + "text.vgm" + kData, dir + "text.vgm", "not a viewgap model file");
  expect_refused(" --model-file " + dir + kData, dir, "is a directory, not a regular file");
  ASSERT_EQ(::mkfifo((dir + "fifo").c_str(), 0600), 0);
  expect_refused(" --model-file " + dir + "fifo" + kData, dir + "fifo", "is a FIFO, not a regular file");
  expect_refused(" --model-file " + dir + "missing.vgm" + kData, dir + "missing.vgm", "No such file or directory");
  // Another image shape: the MNIST-format fixture's 28 x 28 images of 10 classes.
  const std::string idx = test::fixture_data("idx:");
  expect_refused(" --model-file " + good + " --data " + idx + " --quiet", good,
                 "model 'linear' takes images of 1 x 32 x 32, 5 classes; --data '" + idx +
                     "' gives images of 1 x 28 x 28, 10 classes");
  // --out-json over the model file would replace what is being evaluated.
  const test::Outcome same = test::run("eval --model-file " + good + kData + " --out-json " + good);
  EXPECT_EQ(same.code, 2) << same.err;
  EXPECT_EQ(same.err, "viewgap eval: error: --out-json '" + good + "': is the same file as --model-file '" + good + "'\n");
  EXPECT_EQ(slurp(good), bytes);
}

// The flags of training and the models' options are not eval's: each is
// refused by name, before the file is read; a missing --model-file too.
TEST(Eval, TrainingFlagsAreNotTaken) {
  const std::string dir = scratch("flags");
  const std::string file = dir + "m.vgm";
  ASSERT_EQ(test::run("run --models linear" + kData + kTraining + " --save-model " + file).code, 0);
  for (const std::string flag : {"--n-epochs 2", "--lr 0.1", "--models cnn", "--batch-size 10", "--cnn-hidden 80",
                                 "--stop-at-familiar 0.5", "--eval-every 5", "--model-eval-every linear=2",
                                 "--check-sample 10"}) {
    const test::Outcome o = test::run("eval --model-file " + file + kData + " " + flag);
    EXPECT_EQ(o.code, 2) << flag << "\n" << o.err;
    const std::string name = flag.substr(0, flag.find(' ')), value = flag.substr(flag.find(' ') + 1);
    EXPECT_EQ(o.err, "viewgap eval: error: " + name + " '" + value +
                         "': not taken by eval: it concerns training, and the model file holds its model and options\n");
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
  }
  const test::Outcome empty = test::run("eval --model-file " + dir + "m.vgm --lr=" + kData);
  EXPECT_EQ(empty.err.rfind("viewgap eval: error: --lr '': not taken by eval", 0), 0u) << empty.err;
  const test::Outcome first = test::run("eval --model-file " + dir + "missing.vgm --lr 0.1" + kData);
  EXPECT_EQ(first.err.rfind("viewgap eval: error: --lr '0.1': not taken by eval", 0), 0u) << first.err;
  const test::Outcome none = test::run("eval" + kData);
  EXPECT_EQ(none.code, 2);
  EXPECT_NE(none.err.find("--model-file"), std::string::npos) << none.err;
  const test::Outcome help = test::run("eval --help");
  EXPECT_EQ(help.code, 0);
  EXPECT_NE(help.out.find("Not taken (exit 2): --n-epochs"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("--lr "), std::string::npos) << help.out;
}

}  // namespace
}  // namespace vg
