// Model files and checkpoints (harness/checkpoint.h, docs/checkpoints.md):
// every registered model round-trips bit for bit, weights and Adam's state,
// and scores and trains on alike after loading; each refusal is one line
// naming the file; a full disk leaves the previous file as it was; and
// `run --save-model` writes what the run trained, refusing bad values up front.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "harness/checkpoint.h"
#include "harness/run_flags.h"
#include "harness/train.h"
#include "tests/test_util.h"

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::slurp;

std::string scratch(const std::string& name) { return test::fresh_dir("checkpoint/" + name); }

std::vector<uint8_t> bytes_of(const std::string& path) {
  const std::string s = slurp(path);
  return {s.begin(), s.end()};
}

void put(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

// CRC-32 (IEEE 802.3, as zlib and gzip compute it), bit by bit: a reference
// independent of the code under test.
uint32_t crc32_reference(const uint8_t* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return ~c;
}

uint32_t u32_at(const std::vector<uint8_t>& b, size_t at) {
  uint32_t v;
  std::memcpy(&v, b.data() + at, 4);
  return v;
}

// Makes `b` whole again after an edit: its size and both CRC-32s, so that the
// reader gets past them to what the edit is about.
void reseal(std::vector<uint8_t>& b) {
  const uint64_t size = b.size();
  std::memcpy(b.data() + 16, &size, 8);
  const uint32_t head = crc32_reference(b.data(), 28);
  std::memcpy(b.data() + 28, &head, 4);
  const uint32_t all = crc32_reference(b.data(), b.size() - 4);
  std::memcpy(b.data() + b.size() - 4, &all, 4);
}

// What reading `path` throws, or "" if it reads.
std::string read_error(const std::string& path) {
  try {
    read_checkpoint(path);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// A refusal: one line, starting with the file's name, saying `what`.
void expect_refused(const std::string& path, const std::string& what, const std::string& why) {
  const std::string err = read_error(path);
  EXPECT_EQ(err.rfind(path + ": ", 0), 0u) << why << ": " << err;
  EXPECT_NE(err.find(what), std::string::npos) << why << ": " << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << why;
}

// A small model with a trained state: two Adam steps on real images.
struct Trained {
  ModelSpec spec;
  std::unique_ptr<Model> model;
  std::unique_ptr<Trainer> trainer;
};
constexpr int kBatch = 4;
Trained trained(const std::string& name, const ModelOptions& given = {}) {
  Trained t;
  t.spec = {name, model_options_of(name, given), ImageShape{}};
  t.model = make_model(name, t.spec.options, kBatch, t.spec.shape);
  t.model->init(11);
  t.trainer = std::make_unique<Trainer>(*t.model, AdamConfig{}, kBatch);
  std::vector<int> y;
  const std::vector<float> x = test::sample_images(kBatch, &y);
  for (double progress : {0.0, 0.5}) t.trainer->step(x.data(), y.data(), kBatch, progress);
  return t;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// Every model the registry trains: written and read back, the file holds its
// spec, tensors, weights and Adam's state bit for bit; the model loaded from
// it gives the same scores, and with Adam restored its next step the same weights.
TEST(Checkpoint, EveryRegisteredModelRoundTripsBitForBit) {
  const std::string dir = scratch("roundtrip");
  std::vector<int> y;
  const std::vector<float> x = test::sample_images(kBatch, &y);
  for (const std::string& name : test::registered_models(/*trained=*/true)) {
    SCOPED_TRACE(name);
    Trained t = trained(name);
    Checkpoint c = capture_model(t.spec, *t.model, &t.trainer->optimizer());
    c.config = R"({"seed":11})";
    c.config_hash = checkpoint_config_hash(c.config);
    const std::string file = dir + name + ".vgm";
    write_checkpoint(file, c);

    const Checkpoint r = read_checkpoint(file);
    EXPECT_EQ(r.model, t.spec);
    EXPECT_EQ(r.config, c.config);
    EXPECT_EQ(r.config_hash, c.config_hash);
    ASSERT_EQ(r.tensors.size(), size_t(t.model->params().num_tensors()));
    for (int k = 0; k < t.model->params().num_tensors(); ++k) {
      EXPECT_EQ(r.tensors[size_t(k)].name, t.model->params().tensor(k).name);
      EXPECT_EQ(r.tensors[size_t(k)].size, t.model->params().tensor(k).size);
    }
    EXPECT_TRUE(same_bits(r.weights, t.model->params().values()));
    EXPECT_EQ(r.model_state, t.model->training_state());
    ASSERT_TRUE(r.adam.has_value());
    EXPECT_EQ(r.adam->step, 2);
    EXPECT_TRUE(same_bits(r.adam->m, t.trainer->optimizer().m()));
    EXPECT_TRUE(same_bits(r.adam->v, t.trainer->optimizer().v()));

    // Built from the file alone: the same scores, bit for bit.
    const std::unique_ptr<Model> loaded = load_model(r, kBatch, file);
    const float* scores = t.model->forward(x.data(), kBatch);
    const std::vector<float> want(scores, scores + kBatch * t.model->classes());
    const float* got = loaded->forward(x.data(), kBatch);
    EXPECT_EQ(std::memcmp(want.data(), got, want.size() * sizeof(float)), 0);

    // Adam (and cnn-paper's dropout stream) restored: one more step from the
    // file gives the original's weights.
    Trainer resumed(*loaded, AdamConfig{}, kBatch);
    restore_adam(r, resumed.optimizer(), file);
    t.trainer->step(x.data(), y.data(), kBatch, 1.0);
    resumed.step(x.data(), y.data(), kBatch, 1.0);
    EXPECT_TRUE(same_bits(loaded->params().values(), t.model->params().values()));
  }
}

// The next step taken from a fresh optimizer instead differs: the restored
// state is what made the steps above agree.
TEST(Checkpoint, WithoutAdamsStateTheNextStepDiffers) {
  Trained t = trained("cnn");
  const Checkpoint c = capture_model(t.spec, *t.model);
  EXPECT_FALSE(c.adam.has_value());
  const std::unique_ptr<Model> loaded = load_model(c, kBatch, "in memory");
  Trainer fresh(*loaded, AdamConfig{}, kBatch);
  EXPECT_THROW(restore_adam(c, fresh.optimizer(), "f.vgm"), CheckpointError);
  std::vector<int> y;
  const std::vector<float> x = test::sample_images(kBatch, &y);
  t.trainer->step(x.data(), y.data(), kBatch, 1.0);
  fresh.step(x.data(), y.data(), kBatch, 1.0);
  EXPECT_FALSE(same_bits(loaded->params().values(), t.model->params().values()));
}

// Chunks this version does not define are carried through as they are (how
// later steps add what resume needs); the checksum is the standard CRC-32.
TEST(Checkpoint, UnknownChunksAreKeptAndTheChecksumIsCrc32) {
  const std::string dir = scratch("extra");
  Trained t = trained("linear");
  Checkpoint c = capture_model(t.spec, *t.model);
  c.extra["TRAI"] = std::string("step\0\x01\xff", 7);
  c.extra["hist"] = R"([{"epoch":1}])";
  write_checkpoint(dir + "m.vgm", c);
  const std::vector<uint8_t> b = bytes_of(dir + "m.vgm");
  EXPECT_EQ(u32_at(b, b.size() - 4), crc32_reference(b.data(), b.size() - 4));
  EXPECT_EQ(u32_at(b, 28), crc32_reference(b.data(), 28));
  EXPECT_EQ(u32_at(b, 8), kCheckpointVersion);
  const Checkpoint r = read_checkpoint(dir + "m.vgm");
  EXPECT_EQ(r.extra, c.extra);
  EXPECT_FALSE(r.adam.has_value());
  EXPECT_EQ(r.config, "");
  // A tag of this version's, or not four printable characters, is the writer's mistake.
  for (const char* tag : {"HEAD", "ADAM", "abc", "ab de", "a\nbc"}) {
    Checkpoint bad = c;
    bad.extra[tag] = "x";
    EXPECT_THROW(encode_checkpoint(bad), std::invalid_argument) << tag;
  }
  Checkpoint short_weights = c;
  short_weights.weights.pop_back();
  EXPECT_THROW(encode_checkpoint(short_weights), std::invalid_argument);
}

// A training's progress (PROG, LOSS, HIST) round-trips bit for bit, NaN
// and all; a file with part of it, or one that contradicts itself, is refused;
// a model file (step 1's, no progress) still loads, and is no checkpoint to resume.
TEST(Checkpoint, ATrainingsProgressRoundTripsAndIsChecked) {
  const std::string dir = scratch("progress");
  Trained t = trained("linear");
  Checkpoint c = capture_model(t.spec, *t.model, &t.trainer->optimizer());
  c.config = R"({"seed":3})";
  c.config_hash = checkpoint_config_hash(c.config);
  TrainingProgress g;
  g.seed = 3;
  g.steps_per_epoch = 4;
  g.total_steps = 8;
  g.step = 5;
  g.epoch = 2;
  g.next = 10;
  g.loss_sum = 1.0 / 3.0;
  g.stop_target = NAN;
  g.train_s = 0.25;
  g.step_loss = {2.5, 2.25, 2.0, 1.75, 1.0 / 7.0};
  g.history = {{{1, 1.5, 0.25, 0.125, 0.5, {0.5, 1.0 / 3.0}}}, {{1, 1.5, 0.75, NAN, 0.5, {0.25, 0.0}}}};
  c.progress = g;
  write_checkpoint(dir + "c.vgck", c);
  const Checkpoint r = read_checkpoint(dir + "c.vgck");
  ASSERT_TRUE(r.progress.has_value());
  const TrainingProgress& h = *r.progress;
  EXPECT_EQ(std::make_tuple(h.seed, h.steps_per_epoch, h.total_steps, h.step, h.epoch, h.next, h.done, h.stopped_early),
            std::make_tuple(g.seed, g.steps_per_epoch, g.total_steps, g.step, g.epoch, g.next, g.done, g.stopped_early));
  EXPECT_EQ(std::memcmp(&h.loss_sum, &g.loss_sum, 8), 0);
  EXPECT_TRUE(std::isnan(h.stop_target));
  EXPECT_EQ(h.step_loss, g.step_loss);
  ASSERT_EQ(h.history.size(), 2u);
  EXPECT_EQ(h.history[0][0].circle, g.history[0][0].circle);
  EXPECT_TRUE(std::isnan(h.history[1][0].heldout));
  EXPECT_TRUE(r.extra.empty());
  const ModelSpec spec = t.spec;
  EXPECT_NO_THROW(check_resumable(r, spec, c.config, "c.vgck"));
  auto refusal = [&](const Checkpoint& x, const ModelSpec& s, const std::string& config) {
    try {
      check_resumable(x, s, config, "c.vgck");
    } catch (const CheckpointError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal(r, spec, R"({"seed":4})"),
            "c.vgck: a checkpoint of another configuration: hash " + [&] {
              char hex[64];
              std::snprintf(hex, sizeof hex, "%016llx, this run's %016llx", (unsigned long long)c.config_hash,
                            (unsigned long long)checkpoint_config_hash(R"({"seed":4})"));
              return std::string(hex);
            }() + " (its \"seed\" is 3, this run's 4)");
  ModelSpec other = spec;
  other.name = "cnn";
  EXPECT_EQ(refusal(r, other, c.config), "c.vgck: holds model 'linear', not 'cnn'");
  other = spec;
  other.shape.side = 28;
  EXPECT_NE(refusal(r, other, c.config).find("holds a model for images of"), std::string::npos);

  // A model file, as step 1 wrote them: loads; no checkpoint to resume.
  Checkpoint model_file = c;
  model_file.progress.reset();
  model_file.adam.reset();
  write_checkpoint(dir + "m.vgm", model_file);
  EXPECT_NO_THROW(load_model(read_checkpoint(dir + "m.vgm"), kBatch, "m.vgm"));
  EXPECT_EQ(refusal(read_checkpoint(dir + "m.vgm"), spec, c.config),
            "c.vgck: holds no training progress (a model file, not a checkpoint)");

  // The writer refuses a progress that contradicts itself.
  Checkpoint bad = c;
  bad.progress->step_loss.pop_back();
  EXPECT_THROW(encode_checkpoint(bad), std::invalid_argument);
  // PROG without LOSS and HIST (sealed, so the reader gets to it): malformed.
  std::vector<uint8_t> b = encode_checkpoint(c);
  const std::string text(b.begin(), b.end());
  const size_t loss = text.find("LOSS");
  ASSERT_NE(loss, std::string::npos);
  b[loss] = 'l';  // an unknown chunk now
  reseal(b);
  put(dir + "bad.vgck", b);
  expect_refused(dir + "bad.vgck", "PROG, LOSS and HIST come together", "LOSS renamed");
}

// `b` without its chunk `tag` (the chunk count and the CRCs made whole again):
// a file as a viewgap from before that chunk wrote it.
std::vector<uint8_t> without_chunk(std::vector<uint8_t> b, const std::string& tag) {
  const uint32_t count = u32_at(b, 24);
  for (size_t at = 32, k = 0; k < count; ++k) {
    uint64_t length;
    std::memcpy(&length, b.data() + at + 4, 8);
    if (std::string(b.begin() + long(at), b.begin() + long(at + 4)) == tag) {
      b.erase(b.begin() + long(at), b.begin() + long(at + 12 + length));
      const uint32_t fewer = count - 1;
      std::memcpy(b.data() + 24, &fewer, 4);
      reseal(b);
      return b;
    }
    at += 12 + size_t(length);
  }
  ADD_FAILURE() << "no chunk " << tag;
  return b;
}

// Each epoch's step and validation accuracy (TRAJ) round-trip, NaN and all; a
// checkpoint written before TRAJ still loads, its epochs' validation NaN and
// their steps those their ends imply (the last one's where training stopped);
// a TRAJ of another shape than the history, or without one, is refused.
TEST(Checkpoint, AHistorysStepsAndValidationRoundTripAndAFileWithoutThemLoads) {
  const std::string dir = scratch("trajectory");
  Trained t = trained("linear");
  Checkpoint c = capture_model(t.spec, *t.model, &t.trainer->optimizer());
  TrainingProgress g;
  g.seed = 3;
  g.steps_per_epoch = 4;
  g.total_steps = 12;
  g.step = 10;  // stopped early in epoch 3
  g.epoch = 3;
  g.done = g.stopped_early = true;
  g.step_loss.assign(10, 0.5);
  auto rec = [](int epoch, double validation, long step) {
    EpochRecord e{epoch, 1.0, 0.5, 0.25, 0.1, {}};
    e.validation = validation;
    e.step = step;
    return e;
  };
  g.history = {{rec(1, 0.75, 4), rec(2, 1.0 / 3.0, 8), rec(3, 0.875, 10)}, {rec(1, NAN, 4), rec(2, NAN, 8), rec(3, NAN, 10)}};
  c.progress = g;
  write_checkpoint(dir + "c.vgck", c);
  const Checkpoint r = read_checkpoint(dir + "c.vgck");
  ASSERT_TRUE(r.progress.has_value());
  ASSERT_EQ(r.progress->history.size(), 2u);
  for (size_t k = 0; k < 2; ++k)
    for (size_t e = 0; e < 3; ++e) {
      const EpochRecord &got = r.progress->history[k][e], &want = g.history[k][e];
      EXPECT_EQ(got.step, want.step) << k << " " << e;
      EXPECT_EQ(std::memcmp(&got.validation, &want.validation, 8), 0) << k << " " << e;  // NaN's bits too
    }

  // As written before TRAJ: the rest reads the same.
  const std::vector<uint8_t> b = bytes_of(dir + "c.vgck");
  put(dir + "old.vgck", without_chunk(b, "TRAJ"));
  const Checkpoint old = read_checkpoint(dir + "old.vgck");
  ASSERT_TRUE(old.progress.has_value());
  EXPECT_TRUE(old.extra.empty());
  for (size_t k = 0; k < 2; ++k) {
    ASSERT_EQ(old.progress->history[k].size(), 3u);
    for (size_t e = 0; e < 3; ++e) {
      const EpochRecord& got = old.progress->history[k][e];
      EXPECT_TRUE(std::isnan(got.validation)) << k << " " << e;
      EXPECT_EQ(got.step, g.history[k][e].step) << k << " " << e;  // 4, 8, then the stop's 10
      EXPECT_EQ(got.familiar, 0.5);
    }
  }

  // TRAJ of one dataset where HIST has two (a file edited and resealed); TRAJ without HIST.
  Checkpoint one = c;
  one.progress->history.pop_back();
  std::vector<uint8_t> mixed = without_chunk(b, "TRAJ");
  const std::vector<uint8_t> short_traj = bytes_of([&] {
    write_checkpoint(dir + "one.vgck", one);
    return dir + "one.vgck";
  }());
  {  // HIST of c, TRAJ of `one`: append one's TRAJ chunk to the file without its own
    const std::string text(short_traj.begin(), short_traj.end());
    const size_t at = text.find("TRAJ");
    ASSERT_NE(at, std::string::npos);
    uint64_t length;
    std::memcpy(&length, short_traj.data() + at + 4, 8);
    mixed.insert(mixed.end() - 4, short_traj.begin() + long(at), short_traj.begin() + long(at + 12 + length));
    const uint32_t more = u32_at(mixed, 24) + 1;
    std::memcpy(mixed.data() + 24, &more, 4);
    reseal(mixed);
  }
  put(dir + "mixed.vgck", mixed);
  expect_refused(dir + "mixed.vgck", "not of the shape of its history", "TRAJ of one dataset, HIST of two");
  std::vector<uint8_t> bare = without_chunk(without_chunk(without_chunk(b, "PROG"), "LOSS"), "HIST");
  put(dir + "bare.vgck", bare);
  expect_refused(dir + "bare.vgck", "TRAJ chunk without the history", "TRAJ alone");
}

// A spread-loss training's loss at the final margin (SPRD), the epoch's so far
// and each epoch's, round-trips; a file without it (another loss, or written
// before it) reads as NaN; SPRD without the history it completes is refused.
TEST(Checkpoint, TheLossAtTheFinalMarginRoundTripsAndAFileWithoutItLoads) {
  const std::string dir = scratch("final_margin");
  Trained t = trained("linear");
  Checkpoint c = capture_model(t.spec, *t.model, &t.trainer->optimizer());
  TrainingProgress g;
  g.seed = 3;
  g.steps_per_epoch = 4;
  g.total_steps = 12;
  g.step = 10;
  g.epoch = 3;
  g.next = 2;
  g.loss_sum = 1.5;
  g.final_margin_loss_sum = 2.25;
  g.step_loss.assign(10, 0.5);
  auto rec = [](int epoch, double at_final) {
    EpochRecord e{epoch, 1.0, 0.5, 0.25, 0.1, {}};
    e.step = 4L * epoch;
    e.final_margin_loss = at_final;
    return e;
  };
  g.history = {{rec(1, 1.0 / 3.0), rec(2, 0.875)}};
  c.progress = g;
  write_checkpoint(dir + "c.vgck", c);
  const Checkpoint r = read_checkpoint(dir + "c.vgck");
  ASSERT_TRUE(r.progress.has_value());
  EXPECT_EQ(r.progress->final_margin_loss_sum, 2.25);
  ASSERT_EQ(r.progress->history.at(0).size(), 2u);
  EXPECT_EQ(r.progress->history[0][0].final_margin_loss, 1.0 / 3.0);
  EXPECT_EQ(r.progress->history[0][1].final_margin_loss, 0.875);

  // Without SPRD (as another loss writes it, and files from before it).
  const std::vector<uint8_t> b = bytes_of(dir + "c.vgck");
  put(dir + "old.vgck", without_chunk(b, "SPRD"));
  const Checkpoint old = read_checkpoint(dir + "old.vgck");
  ASSERT_TRUE(old.progress.has_value());
  EXPECT_TRUE(old.extra.empty());
  EXPECT_TRUE(std::isnan(old.progress->final_margin_loss_sum));
  for (const EpochRecord& e : old.progress->history[0]) EXPECT_TRUE(std::isnan(e.final_margin_loss)) << e.epoch;
  c.progress->final_margin_loss_sum = NAN;
  write_checkpoint(dir + "xent.vgck", c);
  EXPECT_EQ(bytes_of(dir + "xent.vgck"), without_chunk(b, "SPRD"));  // NaN: no chunk

  put(dir + "bare.vgck", without_chunk(without_chunk(without_chunk(without_chunk(b, "PROG"), "LOSS"), "HIST"), "TRAJ"));
  expect_refused(dir + "bare.vgck", "SPRD chunk without the history", "SPRD alone");
}

// A file cut anywhere is truncated; one byte changed anywhere is corrupted
// (or, in the magic, not a model file): always one line naming the file.
TEST(Checkpoint, TruncatedOrCorruptedFilesAreRefused) {
  const std::string dir = scratch("damage");
  Trained t = trained("linear");
  write_checkpoint(dir + "good.vgm", capture_model(t.spec, *t.model, &t.trainer->optimizer()));
  const std::vector<uint8_t> good = bytes_of(dir + "good.vgm");
  ASSERT_EQ(read_error(dir + "good.vgm"), "");
  const std::string bad = dir + "bad.vgm";
  for (size_t cut : {size_t(0), size_t(5), size_t(31), size_t(32), size_t(40), good.size() / 2, good.size() - 1}) {
    put(bad, std::vector<uint8_t>(good.begin(), good.begin() + long(cut)));
    expect_refused(bad, "truncated", "cut at " + std::to_string(cut));
  }
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  put(bad, longer);
  expect_refused(bad, "corrupted: " + std::to_string(good.size() + 1) + " bytes where its preamble says", "a byte added");
  // Each byte of the first 256 (preamble, chunk headers, HEAD, weights) and
  // every 127th after it, flipped in turn.
  for (size_t at = 0; at < good.size(); at += at < 256 ? 1 : 127) {
    std::vector<uint8_t> b = good;
    b[at] ^= 0x20;
    put(bad, b);
    const std::string what = at < 8 ? "not a viewgap model file" : at < 32 ? "corrupted: the preamble's CRC-32"
                                                                   : "corrupted: the CRC-32 of its contents";
    expect_refused(bad, what, "byte " + std::to_string(at) + " flipped");
  }
  put(bad, std::vector<uint8_t>{'h', 'e', 'l', 'l', 'o', '\n'});
  expect_refused(bad, "not a viewgap model file", "a text file");
}

// Well sealed but of another version, or inconsistent inside: refused by name.
TEST(Checkpoint, AnotherVersionOrAMalformedFileIsRefused) {
  const std::string dir = scratch("version");
  Trained t = trained("linear");
  write_checkpoint(dir + "good.vgm", capture_model(t.spec, *t.model));
  const std::vector<uint8_t> good = bytes_of(dir + "good.vgm");
  const std::string bad = dir + "bad.vgm";
  std::vector<uint8_t> b = good;
  b[8] = 2;
  reseal(b);
  put(bad, b);
  expect_refused(bad, "format version 2; this viewgap reads version 1", "version 2");
  // The weights one float short of the tensors HEAD lists (WGHT's length and the file resealed).
  b = good;
  const std::string text(b.begin(), b.end());
  const size_t w = text.find("WGHT");
  ASSERT_NE(w, std::string::npos);
  uint64_t length;
  std::memcpy(&length, b.data() + w + 4, 8);
  length -= 4;
  std::memcpy(b.data() + w + 4, &length, 8);
  b.erase(b.begin() + long(w + 12), b.begin() + long(w + 16));
  reseal(b);
  put(bad, b);
  expect_refused(bad, "malformed: its tensors hold", "weights short");
  // A chunk count past the chunks there are.
  b = good;
  b[24] += 1;
  reseal(b);
  put(bad, b);
  expect_refused(bad, "malformed: chunk 3 runs past the end", "a chunk too many");
}

// Past the checksums: each byte of every chunk's header, of HEAD and of the
// start of every other chunk flipped, the file resealed so that the parser
// itself meets the damage. Each either reads or is refused in one line naming
// the file: no other exception, no read past a chunk (ASan's build checks that).
TEST(Checkpoint, ResealedDamageInsideTheChunksIsReadOrRefusedInOneLine) {
  const std::string dir = scratch("reseal");
  Trained t = trained("linear");
  Checkpoint c = capture_model(t.spec, *t.model, &t.trainer->optimizer());
  c.model_state = {7, 9};  // an MSTA chunk too
  c.config = R"({"seed":11})";
  c.extra["TRAI"] = "position";
  write_checkpoint(dir + "good.vgm", c);
  const std::vector<uint8_t> good = bytes_of(dir + "good.vgm");
  std::vector<size_t> offsets;
  std::set<std::string> tags;
  for (size_t at = 32, k = 0; k < u32_at(good, 24); ++k) {
    uint64_t length;
    std::memcpy(&length, good.data() + at + 4, 8);
    tags.insert(std::string(good.begin() + long(at), good.begin() + long(at + 4)));
    const size_t span = k == 0 ? 12 + size_t(length) : 12 + std::min<size_t>(size_t(length), 64);
    for (size_t i = 0; i < span; ++i) offsets.push_back(at + i);
    at += 12 + size_t(length);
  }
  EXPECT_EQ(tags, (std::set<std::string>{"HEAD", "WGHT", "MSTA", "ADAM", "CONF", "TRAI"}));
  const std::string bad = dir + "bad.vgm";
  int refused = 0;
  for (size_t at : offsets) {
    std::vector<uint8_t> b = good;
    b[at] ^= 0x40;
    reseal(b);
    put(bad, b);
    try {
      read_checkpoint(bad);
    } catch (const CheckpointError& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.rfind(bad + ": ", 0), 0u) << "byte " << at << ": " << m;
      EXPECT_EQ(m.find('\n'), std::string::npos) << "byte " << at;
      ++refused;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "byte " << at << ": " << e.what();
    }
  }
  EXPECT_GT(refused, 100);  // the tags, lengths, counts and string sizes
}

// A file of another model, or of the same model with other shapes, is refused
// before any weight is copied.
TEST(Checkpoint, AnotherModelOrOtherShapesAreRefused) {
  Trained lin = trained("linear"), cnn = trained("cnn");
  const Checkpoint c = capture_model(lin.spec, *lin.model);
  const std::vector<float> before = cnn.model->params().values();
  try {
    restore_model(c, "cnn", *cnn.model, "f.vgm");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_STREQ(e.what(), "f.vgm: holds model 'linear', not 'cnn'");
  }
  Trained wide = trained("cnn", {{"cnn-hidden", "80"}});
  const Checkpoint w = capture_model(wide.spec, *wide.model);
  try {
    restore_model(w, "cnn", *cnn.model, "f.vgm");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    // The first tensor that differs: the hidden layer's weights (tensor 3).
    const ParamSet &file = wide.model->params(), &here = cnn.model->params();
    ASSERT_EQ(file.tensor(2).name, "hidden.weight");
    EXPECT_EQ(std::string(e.what()), "f.vgm: parameter tensor 3 is 'hidden.weight' of " +
                                         std::to_string(file.tensor(2).size) + " floats; model 'cnn' here has " +
                                         "'hidden.weight' of " + std::to_string(here.tensor(2).size));
  }
  Checkpoint odd_state = capture_model(cnn.spec, *cnn.model);
  odd_state.model_state.push_back(0);
  odd_state.weights[0] += 1;
  try {
    restore_model(odd_state, "cnn", *cnn.model, "f.vgm");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("f.vgm: its training state does not fit model 'cnn': ", 0), 0u) << e.what();
  }
  EXPECT_TRUE(same_bits(cnn.model->params().values(), before));
  // A spec the registry cannot build.
  Checkpoint unknown = c;
  unknown.model.name = "nosuchmodel";
  EXPECT_THROW(load_model(unknown, kBatch, "f.vgm"), CheckpointError);
}

// A checkpoint written before an option was added to its model resumes where
// the run leaves the option at the model's default, and only there.
TEST(Checkpoint, AnOptionAddedSinceTheFileCountsAsTheModelsDefault) {
  Checkpoint c;
  c.model = {"convcaps", model_options_of("convcaps", {}), ImageShape{}};
  const ModelSpec now = c.model;
  c.model.options.erase("spread-margin-schedule");
  c.progress = TrainingProgress{};
  c.config = "{}";
  c.config_hash = checkpoint_config_hash(c.config);
  EXPECT_NO_THROW(check_resumable(c, now, c.config, "old.vgck"));
  ModelSpec official = now;
  official.options["spread-margin-schedule"] = "official";
  try {
    check_resumable(c, official, c.config, "old.vgck");
    ADD_FAILURE() << "no error";
  } catch (const CheckpointError& e) {
    EXPECT_STREQ(e.what(),
                 "old.vgck: holds model 'convcaps' with --spread-margin-schedule unset; this run's is 'official'");
  }
}

// A FIFO (read at once: never waits for a writer), a directory or a missing
// file where the file belongs.
TEST(Checkpoint, AFifoOrADirectoryIsRefusedWithoutWaiting) {
  const std::string dir = scratch("kinds");
  const std::string fifo = dir + "fifo.vgm";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto pending = std::async(std::launch::async, [&] { return read_error(fifo); });
  if (pending.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);  // lets the blocked reader go
    if (fd >= 0) ::close(fd);
    FAIL() << "reading a FIFO waited for a writer";
  }
  const std::string err = pending.get();
  EXPECT_EQ(err, fifo + ": is a FIFO, not a regular file");
  expect_refused(dir, "is a directory, not a regular file", "a directory");
  expect_refused(dir + "missing.vgm", "No such file or directory", "a missing file");
}

// A full disk at any write of a model file: the file that was there stays
// as it was (or, when only the directory's fsync after the rename fails, the
// new one is there whole), no temporary file is left, and the failure is one
// line (exit 1).
TEST(CheckpointCli, DiskFullWhileSavingLeavesThePreviousFile) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string dir = scratch("full");
  const std::string file = dir + "m.vgm";
  const std::string small = " --n-epochs 1 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30"
                            " --n-eval-per-combo 1 --models cnn --quiet --save-model " + file;
  ASSERT_EQ(test::run("run --seed 1" + small).code, 0);
  const std::string before = slurp(file);
  ASSERT_EQ(read_error(file), "");
  const std::string log = dir + "calls.log";
  ASSERT_EQ(test::run("run --seed 2" + small, test::shim_env() + " VIEWGAP_FAULT_LOG=" + log).code, 0);
  const std::string after = slurp(file);
  ASSERT_NE(after, before);  // seed 2 trains other weights: a torn or lost write would show
  ASSERT_EQ(read_error(file), "");
  std::vector<std::string> calls;
  {
    std::ifstream in(log);
    long n;
    std::string call;
    while (in >> n >> call) calls.push_back(call);
  }
  int injected = 0;
  bool renamed = false;
  for (size_t n = 1; n <= calls.size(); ++n) {
    renamed = renamed || calls[n - 1] == "rename";
    if (calls[n - 1] != "write" && calls[n - 1] != "fsync") continue;
    ++injected;
    put(file, std::vector<uint8_t>(before.begin(), before.end()));
    const std::string at = "ENOSPC at call " + std::to_string(n) + " (" + calls[n - 1] + ")";
    const test::Outcome o = test::run("run --seed 2" + small, test::shim_env() + " VIEWGAP_FAULT_ENOSPC_AT=" + std::to_string(n));
    EXPECT_EQ(o.code, 1) << at << "\n" << o.err;
    EXPECT_EQ(o.err, "viewgap: error: cannot write '" + file + "': No space left on device\n") << at;
    EXPECT_TRUE(slurp(file) == (renamed ? after : before)) << at << (renamed ? ": not the new file" : ": not the old file");
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
    EXPECT_EQ(names, (std::set<std::string>{"m.vgm", "calls.log"})) << at;
  }
  EXPECT_GE(injected, 3);  // the file's write and fsync, the directory's fsync
}

// 30 training images, one epoch: a fraction of a second a run.
const std::string kTiny =
    " --n-epochs 1 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30 --n-eval-per-combo 1 --quiet";

// Bad values of --save-model: exit 2, one line naming the flag and the value,
// before any training (nothing is written).
TEST(CheckpointCli, BadSaveModelValuesAreOneLineExitTwo) {
  const std::string dir = scratch("flags");
  fs::create_directories(dir + "sub");
  struct Case {
    std::string args, value, why;
  };
  const std::vector<Case> cases = {
      {"--models linear,cnn --save-model " + dir + "m.vgm", dir + "m.vgm", "names one file for the 2 models"},
      {"--models cnn --save-model " + dir + "sub", dir + "sub", "is a directory"},
      {"--models cnn --save-model " + dir + "nodir/m.vgm", dir + "nodir/m.vgm", "No such file or directory"},
      {"--models cnn,nn1 --save-model " + dir + "{model}.vgm", dir + "{model}.vgm", "model 'nn1' is fit in one pass"},
      {"--models cnn --out-json " + dir + "cnn.vgm --save-model " + dir + "{model}.vgm", dir + "{model}.vgm",
       "is the same file as --out-json"},
  };
  for (const Case& c : cases) {
    const test::Outcome o = test::run("run" + kTiny + " " + c.args);
    EXPECT_EQ(o.code, 2) << c.args << "\n" << o.err;
    EXPECT_EQ(o.err.rfind("viewgap run: error: --save-model '" + c.value + "': ", 0), 0u) << o.err;
    EXPECT_NE(o.err.find(c.why), std::string::npos) << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
  }
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  EXPECT_EQ(names, std::set<std::string>{"sub"});
}

// A run's model files hold the weights the run trained (those an in-process
// run of the same flags hands to on_trained), each under its own name, and
// saving changes nothing the run reports.
TEST(CheckpointCli, SaveModelWritesWhatTheRunTrained) {
  const std::string dir = scratch("save");
  const std::string flags = kTiny + " --models linear,cnn";
  ASSERT_EQ(test::run("run" + flags + " --out-json " + dir + "plain.json").code, 0);
  const test::Outcome o =
      test::run("run" + flags + " --out-json " + dir + "saved.json --save-model " + dir + "m-{model}.vgm");
  ASSERT_EQ(o.code, 0) << o.err;

  RunFlags f;
  f.n_epochs = "1", f.n_per_combo = "1", f.batch_size = "10", f.n_elev = "1", f.elevations = "30:30";
  f.n_eval_per_combo = "1";
  f.models = "linear,cnn";
  int threads = 1;
  const RunOptions opt = validate_run(f, &threads);
  std::map<std::string, std::vector<float>> weights;
  run_experiment(opt, {}, [&](const std::string& name, Model& m, const Dataset&) { weights[name] = m.params().values(); });
  for (const std::string name : {"linear", "cnn"}) {
    SCOPED_TRACE(name);
    const std::string file = dir + "m-" + name + ".vgm";
    const Checkpoint c = read_checkpoint(file);
    EXPECT_EQ(c.model.name, name);
    EXPECT_EQ(c.model.options, model_options_of(name, {}));
    EXPECT_EQ(c.model.shape, ImageShape{});
    EXPECT_FALSE(c.adam.has_value());
    EXPECT_TRUE(same_bits(c.weights, weights.at(name)));
    const nlohmann::json config = nlohmann::json::parse(c.config);
    EXPECT_EQ(config["models"], nlohmann::json({"linear", "cnn"}));
    EXPECT_FALSE(config.contains("threads"));
    EXPECT_EQ(c.config_hash, checkpoint_config_hash(c.config));
  }
  // The results of the run with --save-model are the plain run's, timings aside.
  const auto plain = nlohmann::json::parse(slurp(dir + "plain.json"));
  const auto saved = nlohmann::json::parse(slurp(dir + "saved.json"));
  ASSERT_EQ(plain["models"].size(), 2u);
  for (size_t m = 0; m < 2; ++m)
    for (const char* key : {"step_loss", "familiar", "heldout", "history", "circle_accuracy"}) {
      nlohmann::json a = plain["models"][m][key], b = saved["models"][m][key];
      if (std::string(key) == "history")
        for (size_t e = 0; e < a.size(); ++e) a[e].erase("seconds"), b[e].erase("seconds");
      EXPECT_EQ(a, b) << key;
    }
}

}  // namespace
}  // namespace vg
