// Checkpoints of a training in progress and resuming from them
// (docs/checkpoints.md): every registered model killed (SIGKILL) at a seeded
// random moment of its training resumes to the bits of a run never stopped,
// alone, under the stopping rule and at another thread count; so does a sweep;
// Ctrl-C keeps a checkpoint and the JSON of what finished; a checkpoint that
// does not fit is refused in one line (exit 2); and a full disk during a
// checkpoint leaves the previous one, from which the run resumes; a training
// resumed after it was over only evaluates.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/rng.h"
#include "harness/checkpoint.h"
#include "harness/run_flags.h"
#include "harness/train.h"
#include "tests/test_util.h"

namespace vg {
namespace {

namespace fs = std::filesystem;
using test::slurp;

std::string scratch(const std::string& name) { return test::fresh_dir("resume/" + name); }

// 30 training images, two epochs of three steps: a fraction of a second a run.
const std::string kTiny =
    " --n-epochs 2 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30 --n-eval-per-combo 1 --quiet";

// A run's JSON without what is timing or the machine's (the same run twice differs there only).
nlohmann::json results_of(const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(slurp(path));
  j.erase("timing_s");
  j.erase("meta");
  j["config"].erase("threads");  // on which no result depends
  for (nlohmann::json& m : j["models"]) {
    m.erase("timing_s");
    for (nlohmann::json& e : m["history"]) e.erase("seconds");
    if (m.contains("checks"))
      for (nlohmann::json& e : m["checks"]) e.erase("seconds");
  }
  return j;
}

// The calls the fault shim counts in a run of `args` (tools/fault_shim.c), by name, in order.
std::vector<std::string> counted_calls(const std::string& args, const std::string& dir) {
  const std::string log = dir + "calls.log";
  fs::remove(log);
  const test::Outcome o = test::run(args, test::shim_env() + " VIEWGAP_FAULT_LOG=" + log);
  EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  std::vector<std::string> calls;
  std::ifstream in(log);
  long n = 0;
  std::string call;
  while (in >> n >> call) calls.push_back(call);
  fs::remove(log);
  return calls;
}

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

// A run of `flags` killed at a seeded random one of the file calls it makes
// with checkpoints (each checkpoint's writes, its rename, the JSON's, the
// removal at the end), then resumed with `resume_extra`: the JSON is the
// uninterrupted run's, timings aside, and no checkpoint is left. Every 4th
// step of 3 an epoch: one checkpoint mid-epoch 2 (epoch 1's history, the
// epoch's loss so far), one when training is over (a resume then evaluates).
void kill_and_resume(const std::string& name, const std::string& flags, uint64_t seed,
                     const std::string& resume_extra = "") {
  const std::string dir = scratch(name);
  const std::string ref = dir + "ref.json", got = dir + "got.json";
  const test::Outcome plain = test::run("run" + flags + " --out-json " + ref);
  ASSERT_EQ(plain.code, 0) << plain.err;
  const std::string ck = " --checkpoint " + dir + "{model}.ckpt --checkpoint-every 4 --out-json " + got;
  const std::vector<std::string> calls = counted_calls("run" + flags + ck, dir);
  ASSERT_GT(calls.size(), 8u);
  EXPECT_EQ(results_of(got), results_of(ref)) << "checkpointing changed the results";
  Stream pick(seed, Purpose::Test, 53);
  const size_t at = 1 + pick.below(uint32_t(calls.size()));
  fs::remove(got);
  const std::string where = name + ": SIGKILL at call " + std::to_string(at) + " of " +
                            std::to_string(calls.size()) + " (" + calls[at - 1] + ")";
  const test::Outcome killed = test::run("run" + flags + ck, test::shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(at));
  // The shell reports the kill as 128 + 9, or (where it exec'd viewgap) std::system as no exit code.
  ASSERT_TRUE(killed.code == 128 + SIGKILL || killed.code == -1) << where << ": not killed\n" << killed.err;
  const test::Outcome resumed = test::run("run" + flags + ck + " --resume" + resume_extra);
  ASSERT_EQ(resumed.code, 0) << where << "\n" << resumed.err;
  EXPECT_EQ(results_of(got), results_of(ref)) << where;
  for (const std::string& f : listing(dir))
    EXPECT_TRUE(f == "ref.json" || f == "got.json") << where << ": left " << f;
}

class ResumeEveryModel : public ::testing::TestWithParam<std::string> {};

TEST_P(ResumeEveryModel, KilledAtARandomMomentResumesBitForBit) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string& m = GetParam();
  uint64_t seed = 0;
  for (char c : m) seed = seed * 131 + uint8_t(c);
  kill_and_resume(m, " --seed 4 --models " + m + kTiny, seed);
}

INSTANTIATE_TEST_SUITE_P(Registry, ResumeEveryModel, ::testing::ValuesIn(test::registered_models(/*trained=*/true)),
                         test::model_test_name);

// Two models under the stopping rule, checked every step: a fixed target
// that stops cnn mid-training, and the matched model's (so the matched one's
// checkpoint must give it again); the resumed run on two threads: the same bits.
TEST(Resume, TheStoppingRuleAndAnotherThreadCountResumeBitForBit) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  kill_and_resume("fixed", " --seed 1 --models caps,cnn --stop-at-familiar 0.5 --stop-check-every 1" + kTiny, 1,
                  " --threads 2");
  const nlohmann::json fixed = results_of(test::temp_dir() + "resume/fixed/ref.json");
  EXPECT_TRUE(fixed["models"][1]["stopped_early"].get<bool>());
  // The history's validation accuracies and steps, which the resumed run's matched, are there.
  for (const nlohmann::json& m : fixed["models"]) {
    ASSERT_FALSE(m["history"].empty());
    EXPECT_TRUE(m["history"].back()["validation"].is_number()) << m["name"];
    EXPECT_EQ(m["history"].back()["step"], m["steps"]) << m["name"];
  }
  kill_and_resume("matched", " --seed 1 --models caps,cnn --match-familiar cnn --stop-check-every 1" + kTiny, 2,
                  " --threads 2");
}

// Schedules of the step (a cosine rate over a budget of 5 steps, the official
// spread margin, an exponential decay) resume to the bits of a run never stopped.
TEST(Resume, SchedulesAndABudgetResumeBitForBit) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  kill_and_resume("schedules",
                  " --seed 3 --models caps,cnn --loss spread --spread-margin-schedule official --lr-schedule cosine"
                  " --max-steps 5" + kTiny, 3);
  // caps's epochs carry the loss at the final margin (resumed bit for bit above), cnn's none.
  const nlohmann::json sched = results_of(test::temp_dir() + "resume/schedules/ref.json");
  for (const nlohmann::json& e : sched["models"][0]["history"]) EXPECT_TRUE(e["final_margin_loss"].is_number());
  for (const nlohmann::json& e : sched["models"][1]["history"]) EXPECT_FALSE(e.contains("final_margin_loss"));
  // Checks inside an epoch (--eval-every) resume with the rest: steps 2 and 4 of 3 an epoch.
  kill_and_resume("checks", " --seed 3 --models caps,cnn --validation on --eval-every 2" + kTiny, 5);
  // Checks on a subsample (--check-sample) resume with it.
  kill_and_resume("sampled", " --seed 3 --models caps,cnn --validation on --eval-every 2 --check-sample 20" + kTiny, 5);
  const nlohmann::json checks = results_of(test::temp_dir() + "resume/checks/ref.json");
  for (const nlohmann::json& m : checks["models"]) {
    ASSERT_EQ(m["checks"].size(), 2u) << m["name"];
    EXPECT_EQ(m["checks"][0]["step"], 2);
    EXPECT_EQ(m["checks"][1]["step"], 4);
    EXPECT_EQ(m["checks"][1]["epoch"], 2);
  }
  kill_and_resume("decay", " --seed 3 --models cnn --lr-schedule exp-staircase:0.5:2" + kTiny, 4);
}

// A sweep's tables in DIR, timings aside: what a resumed sweep must give again.
std::vector<std::string> sweep_tables(const std::string& d) {
  return {slurp(d + "/summary.csv"),  slurp(d + "/circle.csv"),     slurp(d + "/trajectory.csv"),
          slurp(d + "/frontier.csv"), slurp(d + "/provenance.csv"), test::without_seconds(slurp(d + "/cells.csv"))};
}

// A sweep killed at a seeded random file call, with a checkpoint of each
// training every step, resumes to the tables of one never stopped (the
// frontier too: a validation split); its checkpoints are gone at the end.
TEST(Resume, ASweepKilledMidTrainingResumesToIdenticalTables) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string args = " --seeds 0:1 --gaps 0,30 --n-epochs 2 --n-per-combo 1 --batch-size 10 --n-elev 1"
                           " --elevations 30:30 --n-eval-per-combo 1 --models caps,cnn --validation on --jobs 1 --quiet";
  const std::string dir = scratch("sweep");
  ASSERT_EQ(test::run("sweep --out " + dir + "ref" + args).code, 0);
  const auto tables = sweep_tables;
  const auto want = tables(dir + "ref");
  const std::vector<std::string> calls = counted_calls("sweep --out " + dir + "count --checkpoint-every 1" + args, dir);
  ASSERT_GT(calls.size(), 40u);
  EXPECT_EQ(tables(dir + "count"), want) << "checkpointing changed the tables";
  EXPECT_FALSE(fs::exists(dir + "count/checkpoints"));
  Stream pick(7, Purpose::Test, 53);
  for (int k = 0; k < 2; ++k) {
    const size_t at = 1 + pick.below(uint32_t(calls.size()));
    const std::string out = dir + "k" + std::to_string(k), where = "SIGKILL at call " + std::to_string(at) + " (" + calls[at - 1] + ")";
    test::run("sweep --out " + out + " --checkpoint-every 1" + args, test::shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(at));
    const test::Outcome again = test::run("sweep --resume --out " + out + " --checkpoint-every 1" + args);
    ASSERT_EQ(again.code, 0) << where << "\n" << again.err;
    EXPECT_EQ(tables(out), want) << where;
    EXPECT_FALSE(fs::exists(out + "/checkpoints")) << where;
  }
}

// Splits run together (sweep --split A,B): killed at seeded random file calls
// mid-training, their joint training checkpointed every step in the first
// split's directory, `--resume` of the splits together gives both sweeps'
// tables as never stopped, and leaves no checkpoint.
TEST(Resume, SplitsRunTogetherKilledMidTrainingResumeToIdenticalTables) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string args = " --data " + test::fixture_data("idx:") +
                           " --split rotation,affine --seeds 0:1 --n-epochs 2 --batch-size 10 --models cnn,linear"
                           " --validation on --jobs 1 --quiet";
  const std::string dir = scratch("splits");
  ASSERT_EQ(test::run("sweep --out " + dir + "ref_{split}" + args).code, 0);
  const std::vector<std::string> want[2] = {sweep_tables(dir + "ref_rotation"), sweep_tables(dir + "ref_affine")};
  const std::vector<std::string> calls = counted_calls("sweep --out " + dir + "count_{split} --checkpoint-every 1" + args, dir);
  ASSERT_GT(calls.size(), 40u);
  EXPECT_EQ(sweep_tables(dir + "count_rotation"), want[0]) << "checkpointing changed the tables";
  Stream pick(11, Purpose::Test, 53);
  for (int k = 0; k < 3; ++k) {
    const size_t at = 1 + pick.below(uint32_t(calls.size()));
    const std::string out = dir + "k" + std::to_string(k) + "_", where = "SIGKILL at call " + std::to_string(at) + " (" + calls[at - 1] + ")";
    test::run("sweep --out " + out + "{split} --checkpoint-every 1" + args, test::shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(at));
    const test::Outcome again = test::run("sweep --resume --out " + out + "{split} --checkpoint-every 1" + args);
    ASSERT_EQ(again.code, 0) << where << "\n" << again.err;
    EXPECT_EQ(sweep_tables(out + "rotation"), want[0]) << where;
    EXPECT_EQ(sweep_tables(out + "affine"), want[1]) << where;
    EXPECT_FALSE(fs::exists(out + "rotation/checkpoints")) << where;
    EXPECT_FALSE(fs::exists(out + "affine/checkpoints")) << where;
  }
}

using vg::test::spawn;

// Ctrl-C (SIGINT) or SIGTERM once the first checkpoint is there: the run
// stops between two steps, writes its checkpoint and the JSON of what
// finished (marked interrupted), exits 128 + signal; resumed, it ends with the
// results of a run never stopped.
TEST(Resume, AnInterruptKeepsACheckpointAndTheJsonOfWhatFinished) {
  const std::string flags = " --seed 2 --models cnn --n-epochs 40 --n-per-combo 1 --batch-size 10 --n-elev 1"
                            " --elevations 30:30 --n-eval-per-combo 1 --quiet";
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const std::string dir = scratch("signal" + std::to_string(sig));
    ASSERT_EQ(test::run("run" + flags + " --out-json " + dir + "ref.json").code, 0);
    const std::string ck = " --checkpoint " + dir + "cnn.ckpt --checkpoint-every 1 --out-json " + dir + "got.json";
    const pid_t pid = spawn("run" + flags + ck, dir + "err");
    const auto t0 = std::chrono::steady_clock::now();
    while (!fs::exists(dir + "cnn.ckpt") && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    // Stopped, the run is where its checkpoint says or one step on (one every
    // step, replaced whole). With two steps or more still to take, the signal
    // must stop it; only a run already past that may finish (a loaded machine).
    int status = 0;
    ::kill(pid, SIGSTOP);
    ::waitpid(pid, &status, WUNTRACED);
    long at = 120;
    if (WIFSTOPPED(status)) {
      if (fs::exists(dir + "cnn.ckpt")) {
        const Checkpoint seen = read_checkpoint(dir + "cnn.ckpt");
        if (seen.progress && !seen.progress->done) at = seen.progress->step;
      }
      ::kill(pid, sig);
      ::kill(pid, SIGCONT);
      ::waitpid(pid, &status, 0);
    }
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << " itself: " << slurp(dir + "err");
    const nlohmann::json partial = nlohmann::json::parse(slurp(dir + "got.json"));
    if (at >= 119) GTEST_SKIP() << "the training was over before the signal (a loaded machine)";
    ASSERT_TRUE(partial.contains("interrupted")) << "signalled at step " << at << " of 120, the run went on to its end";
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    const std::string err = slurp(dir + "err");
    EXPECT_EQ(err.substr(err.rfind('\n', err.size() - 2) + 1), "viewgap: interrupted\n") << err;
    EXPECT_EQ(partial.value("interrupted", false), true);
    const nlohmann::json& m = partial["models"][0];
    EXPECT_EQ(m.value("interrupted", false), true);
    EXPECT_TRUE(m["familiar"].is_null());
    EXPECT_EQ(m["step_loss"].size(), m["steps"].get<size_t>());
    EXPECT_GE(m["steps"].get<long>(), at);
    EXPECT_LT(m["steps"].get<long>(), 120);
    EXPECT_EQ(m["history"].size(), m["steps"].get<size_t>() / 3);  // every epoch it finished, evaluated
    const Checkpoint c = read_checkpoint(dir + "cnn.ckpt");
    ASSERT_TRUE(c.progress.has_value());
    EXPECT_EQ(c.progress->step, m["steps"].get<long>());
    const test::Outcome resumed = test::run("run" + flags + ck + " --resume");
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_EQ(results_of(dir + "got.json"), results_of(dir + "ref.json"));
    EXPECT_FALSE(fs::exists(dir + "cnn.ckpt"));
  }
}

// Ctrl-C (SIGINT) or SIGTERM on a sweep with checkpoints, once its first
// training (cnn, 600 steps) has written its one periodic checkpoint (at step
// 300): the training stops at its next step and checkpoints there, later than
// that one; the group's next model (linear), started after the signal, stops
// before its first step (nothing to save), and the next group never starts.
// No cell is finished, so none has rows; the sweep exits 128 + signal with its
// line. Resumed, it ends with the tables of a sweep never stopped.
TEST(Resume, AnInterruptedSweepCheckpointsItsTrainingsInFlight) {
  const std::string args = " --seeds 0:1 --gaps 0,30 --n-epochs 200 --n-per-combo 1 --batch-size 10 --n-elev 1"
                           " --elevations 30:30 --n-eval-per-combo 1 --models cnn,linear --validation on --jobs 1"
                           " --quiet --checkpoint-every 300";
  const std::string dir = scratch("sweepsignal");
  ASSERT_EQ(test::run("sweep --out " + dir + "ref" + args).code, 0);
  const auto want = sweep_tables(dir + "ref");
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const std::string out = dir + std::to_string(sig), file = out + "/checkpoints/cell-0-cnn.vgck";
    const pid_t pid = spawn("sweep --out " + out + args, out + ".err");
    const auto t0 = std::chrono::steady_clock::now();
    while (!fs::exists(file) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20))
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    ::kill(pid, sig);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status) << " itself: " << slurp(out + ".err");
    ASSERT_TRUE(fs::exists(file)) << slurp(out + ".err");
    const Checkpoint c = read_checkpoint(file);
    ASSERT_TRUE(c.progress.has_value());
    if (c.progress->done) GTEST_SKIP() << "the training was over before the signal (a loaded machine)";
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
    EXPECT_EQ(slurp(out + ".err"), "viewgap sweep: interrupted after 0/4 cells; rerun with --resume to continue\n");
    EXPECT_GT(c.progress->step, 300) << "the periodic checkpoint, not one at the interrupt";
    EXPECT_LT(c.progress->step, 600);
    EXPECT_EQ(c.progress->step_loss.size(), size_t(c.progress->step));
    EXPECT_EQ(listing(out + "/checkpoints"), std::set<std::string>{"cell-0-cnn.vgck"});
    EXPECT_EQ(test::lines(slurp(out + "/cells.csv")), 1);  // the header: no cell finished
    EXPECT_EQ(test::lines(slurp(out + "/trajectory.csv")), 1);
    const test::Outcome resumed = test::run("sweep --resume --out " + out + args);
    ASSERT_EQ(resumed.code, 0) << resumed.err;
    EXPECT_EQ(sweep_tables(out), want);
    EXPECT_FALSE(fs::exists(out + "/checkpoints"));
  }
}

// A checkpoint that is no checkpoint of this training: exit 2, one line that
// names the file and what is wrong, before any training (nothing written).
TEST(Resume, ACheckpointThatDoesNotFitIsRefusedInOneLine) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string dir = scratch("bad");
  const std::string flags = " --seed 5 --models cnn" + kTiny, file = dir + "cnn.ckpt";
  const std::string ck = " --checkpoint " + file + " --checkpoint-every 1";
  // Killed at its last call (the checkpoint's removal): the last checkpoint stays.
  const std::vector<std::string> calls = counted_calls("run" + flags + ck, dir);
  ASSERT_EQ(calls.back(), "unlink");
  test::run("run" + flags + ck, test::shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(calls.size()));
  const std::string good = slurp(file);
  ASSERT_GT(good.size(), 100u);
  ASSERT_TRUE(read_checkpoint(file).progress.has_value());
  ASSERT_EQ(test::run("run" + flags + " --save-model " + dir + "model.vgm").code, 0);
  const std::string model_file = slurp(dir + "model.vgm");

  struct Case {
    std::string what, extra, why;
    std::function<void()> make;
  };
  auto write = [&](const std::string& bytes) {
    return [&, bytes] {
      fs::remove_all(file);
      std::ofstream(file, std::ios::binary) << bytes;
    };
  };
  std::string flipped = good;
  flipped[flipped.size() / 2] ^= 0x10;
  const std::vector<Case> cases = {
      {"truncated", "", "truncated: 100 of the", write(good.substr(0, 100))},
      {"corrupted", "", "corrupted: the CRC-32 of its contents", write(flipped)},
      {"another configuration", " --lr 0.001", "a checkpoint of another configuration: hash ", write(good)},
      {"another model's options", " --cnn-hidden 40", "holds model 'cnn' with --cnn-hidden", write(good)},
      {"a model file", "", "holds no training progress (a model file, not a checkpoint)", write(model_file)},
      {"a FIFO", "", "is a FIFO, not a regular file", [&] {
         fs::remove_all(file);
         ASSERT_EQ(::mkfifo(file.c_str(), 0600), 0);
       }},
      {"a directory", "", "is a directory, not a regular file", [&] {
         fs::remove_all(file);
         fs::create_directories(file);
       }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    c.make();
    const test::Outcome o = test::run("run" + flags + c.extra + ck + " --resume --out-json " + dir + "out.json", "timeout 60");
    EXPECT_EQ(o.code, 2) << o.err;
    EXPECT_EQ(test::lines(o.err), 1) << o.err;
    // Named as the file read (or, for what is no regular file, as --checkpoint's value).
    EXPECT_TRUE(o.err.rfind("viewgap run: error: " + file + ": ", 0) == 0 ||
                o.err.rfind("viewgap run: error: --checkpoint '" + file + "': ", 0) == 0) << o.err;
    EXPECT_NE(o.err.find(c.why), std::string::npos) << o.err;
    EXPECT_FALSE(fs::exists(dir + "out.json"));
  }
  // A checkpoint there without --resume: a training to continue, not to overwrite.
  write(good)();
  const test::Outcome o = test::run("run" + flags + ck);
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_EQ(o.err, "viewgap run: error: --checkpoint '" + file + "': " + file +
                       " holds a checkpoint already: add --resume to continue from it, or remove it\n");
  EXPECT_EQ(slurp(file), good);
}

// A full disk at each write of a checkpoint: the run stops (exit 1, one line
// naming the file), the previous checkpoint is whole and no temporary file is
// left; resumed on a disk with room, the run ends with the results of one
// never stopped.
TEST(Resume, DiskFullDuringACheckpointLeavesThePreviousOneToResumeFrom) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const std::string dir = scratch("full");
  const std::string flags = " --seed 6 --models cnn" + kTiny, file = dir + "cnn.ckpt";
  const std::string ck = " --checkpoint " + file + " --checkpoint-every 1 --out-json " + dir + "got.json";
  ASSERT_EQ(test::run("run" + flags + " --out-json " + dir + "ref.json").code, 0);
  const std::vector<std::string> calls = counted_calls("run" + flags + ck, dir);
  int injected = 0;
  for (size_t n = 1; n <= calls.size(); ++n) {
    if (calls[n - 1] != "write" && calls[n - 1] != "fsync") continue;
    if (injected++ % 3 != 0) continue;  // a third of them: the test stays short
    const std::string at = "ENOSPC at call " + std::to_string(n) + " (" + calls[n - 1] + ")";
    fs::remove(file);
    fs::remove(dir + "got.json");
    const test::Outcome full = test::run("run" + flags + ck, test::shim_env() + " VIEWGAP_FAULT_ENOSPC_AT=" + std::to_string(n));
    EXPECT_EQ(full.code, 1) << at << "\n" << full.err;
    EXPECT_EQ(test::lines(full.err), 1) << at << "\n" << full.err;
    EXPECT_NE(full.err.find("No space left on device"), std::string::npos) << at << "\n" << full.err;
    for (const std::string& f : listing(dir))
      EXPECT_TRUE(f == "ref.json" || f == "cnn.ckpt" || f == "got.json") << at << ": left " << f;
    if (fs::exists(file)) {
      EXPECT_NO_THROW(read_checkpoint(file)) << at;
    }
    const test::Outcome resumed = test::run("run" + flags + ck + " --resume");
    ASSERT_EQ(resumed.code, 0) << at << "\n" << resumed.err;
    EXPECT_EQ(results_of(dir + "got.json"), results_of(dir + "ref.json")) << at;
  }
  EXPECT_GE(injected, 10);
}

// In process: a time interval writes between steps (here, at every one), the
// last checkpoint is of the training over, and a run resumed from it only
// evaluates (it times no step) and reports the same bits, on one thread or two.
TEST(Resume, ATrainingResumedFromItsLastCheckpointOnlyEvaluates) {
  const std::string dir = scratch("inprocess");
  RunFlags f;
  f.n_epochs = "2", f.n_per_combo = "1", f.batch_size = "10", f.n_elev = "1", f.elevations = "30:30";
  f.n_eval_per_combo = "1";
  f.models = "linear,cnn";
  int threads = 1;
  RunOptions opt = validate_run(f, &threads);
  const RunResult plain = run_experiment(opt);
  opt.train.checkpoint.file = dir + "{model}.ckpt";
  opt.train.checkpoint.every_seconds = 1e-9;
  opt.train.checkpoint.config = "{}";
  const RunResult written = run_experiment(opt);
  opt.train.checkpoint.resume = true;
  for (const int t : {1, 2}) {
    opt.threads = t;
    const RunResult resumed = run_experiment(opt);
    for (size_t m = 0; m < 2; ++m) {
      SCOPED_TRACE(plain.models[m].name + " on " + std::to_string(t) + " thread(s)");
      const Checkpoint c = read_checkpoint(dir + plain.models[m].name + ".ckpt");
      ASSERT_TRUE(c.progress.has_value());
      EXPECT_TRUE(c.progress->done);
      EXPECT_EQ(c.progress->step, plain.models[m].steps);
      EXPECT_EQ(c.progress->step_loss, plain.models[m].step_loss);
      EXPECT_EQ(written.models[m].step_s.size(), size_t(plain.models[m].steps));
      EXPECT_TRUE(resumed.models[m].step_s.empty());  // not one step trained again
      for (const RunResult* r : {&written, &resumed}) {
        const ModelResult& a = plain.models[m];
        const ModelResult& b = r->models[m];
        EXPECT_EQ(a.step_loss, b.step_loss);
        EXPECT_EQ(std::make_tuple(a.familiar, a.heldout), std::make_tuple(b.familiar, b.heldout));
        EXPECT_EQ(a.heldout_per_class, b.heldout_per_class);
        EXPECT_EQ(a.circle_acc, b.circle_acc);
        ASSERT_EQ(a.history.size(), b.history.size());
        for (size_t e = 0; e < a.history.size(); ++e)
          EXPECT_EQ(std::make_tuple(a.history[e].loss, a.history[e].familiar, a.history[e].heldout),
                    std::make_tuple(b.history[e].loss, b.history[e].familiar, b.history[e].heldout));
      }
    }
  }
}

}  // namespace
}  // namespace vg
