// What viewgap promises about faults (issue 9; docs/cli.md "Crashes, full disks,
// concurrent runs, output paths"), tested on the binary: a full disk at any write, a SIGKILL
// at any write or rename, damaged per-cell files, a second sweep on the same
// directory, Ctrl-C / SIGTERM, output paths that are not plain files, and a
// stdout that cannot be written. Faults are injected by tools/fault_shim.c
// (LD_PRELOAD, test-only) into a tiny sweep (4 cells of a 1-epoch CNN).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/output.h"
#include "tests/test_util.h"

using vg::test::shim_env;

namespace {

// Every counted call in turn; under AddressSanitizer (runs ~5x slower) every
// 4th, to stay within CI's time (the release build covers them all).
#ifdef __SANITIZE_ADDRESS__
constexpr size_t kStride = 4;
#else
constexpr size_t kStride = 1;
#endif

namespace fs = std::filesystem;
using vg::test::lines;
using vg::test::without_seconds;
using vg::test::slurp;

// 2 seeds x 2 gaps, one CNN epoch on 30 images: ~0.1 s a cell.
const std::string kSmall =
    " --seeds 0:1 --gaps 0,30 --n-epochs 1 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30"
    " --n-eval-per-combo 1 --models cnn --jobs 1 --quiet";
// 12 cells of the same: long enough to interrupt or stop mid-sweep.
const std::string kLonger =
    " --seeds 0:5 --gaps 0,30 --n-epochs 2 --n-per-combo 1 --batch-size 10 --n-elev 1 --elevations 30:30"
    " --n-eval-per-combo 1 --models cnn --jobs 1 --quiet";
// What a sweep directory may hold at any moment, and what a finished one holds
// (its lock goes when the sweep ends).
const std::set<std::string> kSweepFiles = {"azimuth.csv",    "cells.csv",   "circle.csv", "frontier.csv",  "meta.json",
                                           "provenance.csv", "summary.csv", "sweep.lock", "trajectory.csv"};
const std::set<std::string> kFinishedSweepFiles = {"azimuth.csv",    "cells.csv",   "circle.csv",    "frontier.csv", "meta.json",
                                                   "provenance.csv", "summary.csv", "trajectory.csv"};

std::string tmp_dir(const std::string& name) {
  const std::string d = vg::test::temp_dir() + "viewgap_faults." + std::to_string(getpid()) + "/" + name;
  fs::remove_all(d);
  fs::create_directories(fs::path(d).parent_path());
  return d;
}

struct Result {
  int code;  // exit code; 128 + n for a signal (as the shell reports it)
  std::string out, err;
};

// `viewgap ARGS` with ENV in front, through the shell.
Result viewgap(const std::string& args, const std::string& env = "", const std::string& stdout_to = "") {
  const std::string tag = vg::test::temp_dir() + "viewgap_faults_io." + std::to_string(getpid());
  const std::string out = stdout_to.empty() ? tag + ".out" : stdout_to;
  const std::string cmd = env + " " + vg::test::paths::exe + " " + args + " >" + out + " 2>" + tag + ".err";
  const int status = std::system(cmd.c_str());
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return {code, stdout_to.empty() ? slurp(out) : "", slurp(tag + ".err")};
}

using vg::test::spawn;

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Polls `ready` every 5 ms for up to 30 s.
template <typename F>
bool eventually(F ready) {
  for (int k = 0; k < 6000; ++k) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}


// The result tables of a sweep, timing aside (provenance.csv: one build on one machine here).
std::map<std::string, std::string> tables(const std::string& dir) {
  return {{"summary.csv", slurp(dir + "/summary.csv")},
          {"provenance.csv", slurp(dir + "/provenance.csv")},
          {"azimuth.csv", slurp(dir + "/azimuth.csv")},
          {"circle.csv", slurp(dir + "/circle.csv")},
          {"trajectory.csv", slurp(dir + "/trajectory.csv")},
          {"frontier.csv", slurp(dir + "/frontier.csv")},
          {"cells.csv", without_seconds(slurp(dir + "/cells.csv"))}};
}

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) names.insert(e.path().filename().string());
  return names;
}

std::string names(const std::set<std::string>& s) {
  std::string out;
  for (const auto& n : s) out += n + " ";
  return out;
}

// An uninterrupted sweep: the tables every faulted one must end with.
std::map<std::string, std::string> reference(const std::string& args) {
  const std::string dir = tmp_dir("reference");
  const Result r = viewgap("sweep --out " + dir + args);
  EXPECT_EQ(r.code, 0) << r.err;
  auto t = tables(dir);
  fs::remove_all(dir);
  return t;
}

void expect_identical(const std::map<std::string, std::string>& want, const std::string& dir, const std::string& what) {
  const auto got = tables(dir);
  for (const auto& [file, text] : want) EXPECT_EQ(got.at(file), text) << what << ": " << file << " differs";
}


// The calls the shim counts in a run of `args`: their names, in order.
std::vector<std::string> counted_calls(const std::string& args) {
  const std::string log = vg::test::temp_dir() + "viewgap_faults_log." + std::to_string(getpid());
  fs::remove(log);
  const Result r = viewgap(args, shim_env() + " VIEWGAP_FAULT_LOG=" + log);
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> calls;
  std::ifstream in(log);
  long n = 0;
  std::string call;
  while (in >> n >> call) calls.push_back(call);
  return calls;
}

TEST(SweepFaults, DiskFullAtEachWriteStopsWithOneLineAndResumesToIdenticalTables) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const auto want = reference(kSmall);
  const std::string probe = tmp_dir("count");
  const std::vector<std::string> calls = counted_calls("sweep --out " + probe + kSmall);
  ASSERT_GT(calls.size(), 20u);
  int injected = 0;
  for (size_t n = 1; n <= calls.size(); ++n) {
    const std::string& c = calls[n - 1];
    if (c != "write" && c != "pwrite" && c != "writev" && c != "fsync") continue;
    if (injected++ % kStride != 0) continue;
    const std::string dir = tmp_dir("full" + std::to_string(n));
    const std::string at = "ENOSPC at call " + std::to_string(n) + " (" + c + ")";
    // The disk fills up at call n and stays full: the sweep stops at once.
    const Result full = viewgap("sweep --out " + dir + kSmall, shim_env() + " VIEWGAP_FAULT_ENOSPC_AT=" + std::to_string(n));
    EXPECT_EQ(full.code, 1) << at << "\n" << full.err;
    EXPECT_EQ(lines(full.err), 1) << at << "\n" << full.err;
    EXPECT_NE(full.err.find("cannot write '" + dir + "/"), std::string::npos) << at << "\n" << full.err;
    EXPECT_NE(full.err.find("No space left on device"), std::string::npos) << at << "\n" << full.err;
    EXPECT_EQ(full.out, "") << at;
    for (const auto& name : listing(dir)) EXPECT_TRUE(kSweepFiles.count(name)) << at << ": stray " << name;
    // The same sweep on a disk with room: the tables of an uninterrupted one.
    const Result again = viewgap("sweep --resume --out " + dir + kSmall);
    ASSERT_EQ(again.code, 0) << at << "\n" << again.err;
    expect_identical(want, dir, at);
    EXPECT_EQ(listing(dir), kFinishedSweepFiles) << at << ": " << names(listing(dir));
    fs::remove_all(dir);
  }
  EXPECT_GT(injected, 10);  // writes of meta.json, the tables, the lock and every cell
}

TEST(SweepFaults, KillAtEachWriteOrRenameResumesToIdenticalTablesWithNoStrayFiles) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  const auto want = reference(kSmall);
  const std::string probe = tmp_dir("count");
  const std::vector<std::string> calls = counted_calls("sweep --out " + probe + kSmall);
  ASSERT_GT(calls.size(), 20u);
  for (size_t n = 1; n <= calls.size(); n += kStride) {
    const std::string dir = tmp_dir("kill" + std::to_string(n));
    const std::string at = "SIGKILL at call " + std::to_string(n) + " (" + calls[n - 1] + ")";
    const Result killed = viewgap("sweep --out " + dir + kSmall, shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(n));
    ASSERT_EQ(killed.code, 128 + SIGKILL) << at << "\n" << killed.err;
    // Whatever the kill left, the directory is recognisably this sweep's: a
    // directory killed before its first table is taken by a fresh run and by
    // --resume alike.
    const bool started = fs::exists(dir + "/meta.json");
    const std::string flag = started || n % 2 == 1 ? " --resume" : "";
    const Result again = viewgap("sweep --out " + dir + flag + kSmall);
    ASSERT_EQ(again.code, 0) << at << ", then" << flag << ":\n" << again.err;
    expect_identical(want, dir, at);
    EXPECT_EQ(listing(dir), kFinishedSweepFiles) << at << ": " << names(listing(dir));
    fs::remove_all(dir);
  }
}

// A recheck (--resume with another --model-eval-every: linear's checks
// change, cnn's rows are kept) killed at any write or rename, then resumed
// with the same flags: the tables of a sweep run with the new checks from the
// start, and cnn's rows still those of its first training, to the byte (their
// seconds too): no kill loses a kept row, so cnn never trains again.
TEST(SweepFaults, KillAtEachWriteOfARecheckLosesNoKeptRow) {
  if (!kHaveShim) GTEST_SKIP() << "no fault shim in this build (cross-compiled)";
  std::string two = kSmall;
  two.replace(two.find("--models cnn"), 12, "--models cnn,linear");
  const std::string checks = " --model-eval-every linear=1";
  const auto want = reference(two + checks);
  const std::string base = tmp_dir("recheck_base");
  ASSERT_EQ(viewgap("sweep --out " + base + two).code, 0);
  auto cnn_rows = [](const std::string& dir) {
    std::string rows;
    std::stringstream ss(slurp(dir + "/cells.csv"));
    for (std::string line; std::getline(ss, line);)
      if (line.find(",cnn,") != std::string::npos) rows += line + "\n";
    return rows;
  };
  const std::string kept = cnn_rows(base);
  ASSERT_EQ(lines(kept), 4);
  const std::string recheck = " --resume --quiet" + checks;
  const std::string probe = tmp_dir("recheck_count");
  fs::copy(base, probe);
  const std::vector<std::string> calls = counted_calls("sweep --out " + probe + recheck);
  ASSERT_GT(calls.size(), 10u);
  for (size_t n = 1; n <= calls.size(); n += kStride) {
    const std::string dir = tmp_dir("recheck" + std::to_string(n));
    fs::copy(base, dir);
    const std::string at = "SIGKILL at call " + std::to_string(n) + " (" + calls[n - 1] + ")";
    const Result killed = viewgap("sweep --out " + dir + recheck, shim_env() + " VIEWGAP_FAULT_KILL_AT=" + std::to_string(n));
    ASSERT_EQ(killed.code, 128 + SIGKILL) << at << "\n" << killed.err;
    const Result again = viewgap("sweep --out " + dir + recheck);
    ASSERT_EQ(again.code, 0) << at << "\n" << again.err;
    expect_identical(want, dir, at);
    EXPECT_EQ(cnn_rows(dir), kept) << at;
    EXPECT_EQ(listing(dir), kFinishedSweepFiles) << at << ": " << names(listing(dir));
    fs::remove_all(dir);
  }
}

// Resumes a finished copy of the small sweep after `damage`: every cell that
// lost any of its rows runs again, and the tables come out as before.
TEST(SweepFaults, ResumeRerunsEveryCellMissingRowsInAnyFile) {
  const std::string base = tmp_dir("damage_base");
  ASSERT_EQ(viewgap("sweep --out " + base + kSmall).code, 0);
  const auto want = tables(base);
  auto drop_line = [](std::string text, int k) {  // line k (1 = first data row)
    size_t pos = 0;
    for (int i = 0; i < k; ++i) pos = text.find('\n', pos) + 1;
    return text.erase(pos, text.find('\n', pos) - pos + 1);
  };
  auto line_at = [](const std::string& text, int k) {
    size_t pos = 0;
    for (int i = 0; i < k; ++i) pos = text.find('\n', pos) + 1;
    return text.substr(pos, text.find('\n', pos) - pos + 1);
  };
  // The first row's text from `from` (a field ending a line, or a row's start)
  // replaced by `to`. (No std::regex: GCC 12 warns inside it under ASan.)
  auto replace_first = [](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) text.replace(at, from.size(), to);
    return text;
  };
  const std::string cells = slurp(base + "/cells.csv"), circle = slurp(base + "/circle.csv"),
                    trajectory = slurp(base + "/trajectory.csv"), provenance = slurp(base + "/provenance.csv");
  // A provenance row's dirty flag (its fourth field) set to what it never is.
  const std::string prov1 = line_at(provenance, 1);
  size_t third = 0;
  for (int k = 0; k < 3; ++k) third = prov1.find(',', third) + 1;
  const std::string prov1_bad = prov1.substr(0, third) + "maybe" + prov1.substr(prov1.find(',', third));
  // A trajectory row's held-out error (its last field) set out of range.
  const std::string traj1 = line_at(trajectory, 1);
  const std::string traj1_bad = traj1.substr(0, traj1.rfind(',') + 1) + "-0.5\n";
  // A circle row's accuracy (its last field) set out of range.
  const std::string row2 = line_at(circle, 2);
  const std::string row2_bad = row2.substr(0, row2.rfind(',') + 1) + "1.5\n";
  const std::vector<std::pair<std::string, std::pair<std::string, std::string>>> damages = {
      {"circle.csv deleted", {"circle.csv", "<delete>"}},
      {"circle.csv's last line torn", {"circle.csv", circle.substr(0, circle.size() - 5)}},
      {"circle.csv cut to its header", {"circle.csv", circle.substr(0, circle.find('\n') + 1)}},
      {"a circle row dropped", {"circle.csv", drop_line(circle, 40)}},
      {"a circle row duplicated", {"circle.csv", circle + line_at(circle, 3)}},
      {"a circle accuracy out of range", {"circle.csv", replace_first(circle, row2, row2_bad)}},
      {"trajectory.csv's last line torn", {"trajectory.csv", trajectory.substr(0, trajectory.size() - 5)}},
      {"trajectory.csv cut to its header", {"trajectory.csv", trajectory.substr(0, trajectory.find('\n') + 1)}},
      {"a trajectory row dropped", {"trajectory.csv", drop_line(trajectory, 2)}},
      {"a trajectory row duplicated", {"trajectory.csv", trajectory + line_at(trajectory, 1)}},
      {"a trajectory error out of range", {"trajectory.csv", replace_first(trajectory, traj1, traj1_bad)}},
      // (provenance.csv deleted reads as a sweep begun before the table: its cells' provenance unknown.)
      {"provenance.csv's last line torn", {"provenance.csv", provenance.substr(0, provenance.size() - 5)}},
      {"provenance.csv cut to its header", {"provenance.csv", provenance.substr(0, provenance.find('\n') + 1)}},
      {"a provenance row dropped", {"provenance.csv", drop_line(provenance, 2)}},
      {"a provenance row duplicated", {"provenance.csv", provenance + line_at(provenance, 1)}},
      {"a provenance row's dirty flag damaged", {"provenance.csv", replace_first(provenance, prov1, prov1_bad)}},
      {"a provenance row's seed changed", {"provenance.csv", replace_first(provenance, "\n1,1,", "\n1,7,")}},
      {"cells.csv deleted", {"cells.csv", "<delete>"}},
      {"a cells row dropped", {"cells.csv", drop_line(cells, 2)}},
      {"a cells row duplicated", {"cells.csv", cells + line_at(cells, 1)}},
      {"a cells row's seed changed", {"cells.csv", replace_first(cells, "\n1,1,", "\n1,7,")}},
  };
  for (const auto& [what, change] : damages) {
    const std::string dir = tmp_dir("damaged");
    fs::copy(base, dir);
    if (change.second == "<delete>") fs::remove(dir + "/" + change.first);
    else std::ofstream(dir + "/" + change.first, std::ios::trunc) << change.second;
    const Result r = viewgap("sweep --resume --out " + dir + kSmall);
    ASSERT_EQ(r.code, 0) << what << "\n" << r.err;
    EXPECT_EQ(r.out.find(" 0 run now"), std::string::npos) << what << ": nothing was rerun\n" << r.out;
    expect_identical(want, dir, what);
    EXPECT_EQ(listing(dir), kFinishedSweepFiles) << what;
  }
}

TEST(SweepFaults, SecondProcessOnTheSameDirectoryIsRefusedNamingTheHolderPid) {
  const std::string dir = tmp_dir("locked"), err = dir + ".err";
  const pid_t first = spawn("sweep --out " + dir + kLonger, err);
  const std::string holder = "pid " + std::to_string(first);
  ASSERT_TRUE(eventually([&] { return slurp(dir + "/sweep.lock") == holder + "\n"; })) << slurp(err);
  kill(first, SIGSTOP);  // hold the lock while the second process tries
  for (const char* resume : {"", " --resume"}) {
    const Result second = viewgap("sweep --out " + dir + resume + kLonger);
    EXPECT_EQ(second.code, 2) << resume << "\n" << second.err;
    EXPECT_EQ(lines(second.err), 1) << second.err;
    EXPECT_NE(second.err.find("--out '" + dir + "': is in use by another viewgap process (" + holder + ")"),
              std::string::npos)
        << second.err;
  }
  kill(first, SIGCONT);
  ASSERT_EQ(wait_exit(first), 0) << slurp(err);
  EXPECT_EQ(lines(slurp(dir + "/cells.csv")), 1 + 12);  // each cell once
  EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/meta.json"))["cells_done"], 12);
  EXPECT_FALSE(fs::exists(dir + "/sweep.lock"));  // the sweep is over
}

TEST(SweepFaults, InterruptSaysHowFarItGotAndResumesToIdenticalTables) {
  const auto want = reference(kLonger);
  for (const int sig : {SIGINT, SIGTERM}) {
    const std::string dir = tmp_dir("interrupted" + std::to_string(sig)), err = dir + ".err";
    const pid_t pid = spawn("sweep --out " + dir + kLonger, err);
    // After the first cell has landed.
    ASSERT_TRUE(eventually([&] { return lines(slurp(dir + "/cells.csv")) >= 2; })) << slurp(err);
    kill(pid, sig);
    EXPECT_EQ(wait_exit(pid), 128 + sig);
    const std::string msg = slurp(err);
    const std::string head = "viewgap sweep: interrupted after ", tail = "/12 cells; rerun with --resume to continue\n";
    ASSERT_TRUE(msg.starts_with(head) && msg.ends_with(tail)) << msg;
    const std::string count = msg.substr(head.size(), msg.size() - head.size() - tail.size());
    ASSERT_TRUE(!count.empty() && count.find_first_not_of("0123456789") == std::string::npos) << msg;
    const int k = std::stoi(count);
    EXPECT_GE(k, 1);
    EXPECT_EQ(lines(slurp(dir + "/cells.csv")), 1 + k);  // exactly the cells it reported
    EXPECT_EQ(nlohmann::json::parse(slurp(dir + "/meta.json"))["cells_done"], k);  // and so does meta.json
    for (const auto& name : listing(dir)) EXPECT_TRUE(kSweepFiles.count(name)) << "stray " << name;
    const Result again = viewgap("sweep --resume --out " + dir + kLonger);
    ASSERT_EQ(again.code, 0) << again.err;
    EXPECT_NE(again.out.find(std::to_string(k) + " resumed"), std::string::npos) << again.out;
    expect_identical(want, dir, "after signal " + std::to_string(sig));
  }
}

// Why the signals wait on a thread of their own (harness/output.cpp,
// install_interrupt_handlers): no thread that trains or evaluates may be
// interrupted by them, since a handler's frame would go below its stack
// pointer, which oneDNN's JIT GEMM kernels point into the heap (a corrupted
// heap, at random, after an interrupt). In a child process (the signals are
// the process's): once installed, the three are blocked in the installing
// thread and in every thread started after; a first signal under
// DeferInterrupts only becomes pending; when the last DeferInterrupts goes,
// the process exits 128 + signal with its line.
// A child process, its stderr into `err`, with the interrupt handling
// installed, that runs `body` and exits 1 if `body` returns; its wait status.
int status_of_child(const std::string& err, const std::function<void()>& body) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, STDERR_FILENO);
    vg::install_interrupt_handlers();
    body();
    ::_exit(1);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) ADD_FAILURE() << "fork or waitpid failed";
  return status;
}

TEST(Interrupts, NoWorkingThreadTakesASignalAndADeferredOneEndsTheProcessInOrder) {
  const std::string err = tmp_dir("deferred.err");
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(sig);
    const int status = status_of_child(err, [sig] {
      auto all_blocked = [] {
        sigset_t now;
        ::pthread_sigmask(SIG_BLOCK, nullptr, &now);
        return sigismember(&now, SIGINT) == 1 && sigismember(&now, SIGTERM) == 1 && sigismember(&now, SIGHUP) == 1;
      };
      if (!all_blocked()) ::_exit(10);
      bool worker_blocked = false;
      std::thread([&] { worker_blocked = all_blocked(); }).join();
      if (!worker_blocked) ::_exit(11);
      {
        const vg::DeferInterrupts defer;
        if (vg::interrupt_pending()) ::_exit(12);
        ::kill(::getpid(), sig);
        const auto t0 = std::chrono::steady_clock::now();
        while (!vg::interrupt_pending())
          if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) ::_exit(13);
      }
      ::_exit(14);  // not reached: the DeferInterrupts' end ends the process
    });
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << "10: this thread, 11: a later thread takes signals; "
                                                 "12, 13: pending too early, never";
    EXPECT_EQ(slurp(err), "viewgap: interrupted\n");
  }
}

// An MPI worker rank's (end_silently_on_interrupt): killed by the signal, not a word.
TEST(Interrupts, EndingSilentlyIsTheSignalsDefaultAction) {
  const std::string err = tmp_dir("silent.err");
  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig);
    const int status = status_of_child(err, [sig] {
      vg::end_silently_on_interrupt();
      ::kill(::getpid(), sig);
      std::this_thread::sleep_for(std::chrono::seconds(10));
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << "exited " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(slurp(err), "");
  }
}

// Output paths name regular files: a symlink is followed to the file it names
// (the link stays), anything else that exists is refused before any work.
TEST(OutputPaths, SymlinksAreFollowedAndOtherFilesThanRegularOnesRefused) {
  const std::string dir = tmp_dir("paths");
  fs::create_directories(dir);
  const std::string quick = " --n-epochs 1 --n-per-combo 1 --batch-size 10 --models cnn --quiet";
  // A symlink to a file, and a dangling one: the file named is written.
  fs::create_symlink("target.json", dir + "/link.json");
  fs::create_symlink("new.json", dir + "/dangling.json");
  for (const char* link : {"/link.json", "/dangling.json"}) {
    const Result r = viewgap("run --out-json " + dir + link + quick);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(fs::is_symlink(dir + link)) << link;
    const std::string target = dir + "/" + fs::read_symlink(dir + link).string();
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(target))) << target;
    EXPECT_EQ(nlohmann::json::parse(slurp(target))["kind"], "viewgap-run");
  }
  // Not regular files: refused, and left as they were.
  ASSERT_EQ(mkfifo((dir + "/fifo").c_str(), 0644), 0);
  fs::create_directories(dir + "/adir");
  fs::create_symlink("fifo", dir + "/to_fifo");
  const bool have_device = mknod((dir + "/null").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0;
  fs::create_directories(dir + "/dump");
  ASSERT_EQ(mkfifo((dir + "/dump/run.json").c_str(), 0644), 0);
  struct Case {
    std::string args, mention, why;
  };
  const std::string profile = " --steps 1 --warmup 0 --model cnn";
  std::vector<Case> cases = {
      {"run --out-json " + dir + "/fifo" + quick, "--out-json '" + dir + "/fifo'", "is a FIFO"},
      {"run --out-json " + dir + "/adir" + quick, "--out-json '" + dir + "/adir'", "is a directory"},
      {"run --out-json " + dir + "/to_fifo" + quick, "--out-json '" + dir + "/to_fifo'", "leads to '" + dir + "/fifo', a FIFO"},
      {"run --dump " + dir + "/dump" + quick, "--dump '" + dir + "/dump'", "is a FIFO"},
      {"profile --out " + dir + "/fifo" + profile, "--out '" + dir + "/fifo'", "is a FIFO"},
      {"profile --out " + dir + "/p.csv --trace " + dir + "/fifo" + profile, "--trace '" + dir + "/fifo'", "is a FIFO"},
      {"run --out-json /dev/null" + quick, "--out-json '/dev/null'", "is a character device"},
      // Here stdout is a file: replacing it would lose the table printed there.
      {"run --out-json /dev/stdout" + quick, "--out-json '/dev/stdout'", "standard output"},
  };
  if (have_device)
    cases.push_back({"run --out-json " + dir + "/null" + quick, "--out-json '" + dir + "/null'", "is a character device"});
  for (const Case& c : cases) {
    const Result r = viewgap(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(lines(r.err), 1) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.mention + ": "), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.why), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_EQ(r.out, "") << c.args;
  }
  EXPECT_TRUE(fs::is_fifo(dir + "/fifo"));
  EXPECT_TRUE(fs::is_fifo(dir + "/dump/run.json"));
  EXPECT_TRUE(fs::is_directory(dir + "/adir"));
  EXPECT_TRUE(fs::is_symlink(dir + "/to_fifo"));
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  if (have_device) {
    EXPECT_TRUE(fs::is_character_file(dir + "/null"));
  }
  EXPECT_FALSE(fs::exists(dir + "/p.csv"));
  // A sweep's own files too: a FIFO where its summary goes is refused before any cell.
  const std::string sweep = dir + "/sweep";
  ASSERT_EQ(viewgap("sweep --out " + sweep + kSmall).code, 0);
  fs::remove(sweep + "/summary.csv");
  ASSERT_EQ(mkfifo((sweep + "/summary.csv").c_str(), 0644), 0);
  const Result r = viewgap("sweep --resume --out " + sweep + kSmall);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--out '" + sweep + "': summary.csv: is a FIFO"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_fifo(sweep + "/summary.csv"));
}

TEST(Stdout, AWriteErrorIsExitOneWithOneLine) {
  const std::string dir = tmp_dir("stdout");
  for (const std::string& args :
       {std::string("run --n-epochs 1 --n-per-combo 1 --batch-size 10 --models cnn --quiet"),
        "sweep --out " + dir + kSmall, std::string("run --help")}) {
    const Result r = viewgap(args, "", "/dev/full");
    EXPECT_EQ(r.code, 1) << args << "\n" << r.err;
    EXPECT_EQ(r.err, "viewgap: error: cannot write standard output: No space left on device\n") << args;
  }
}

}  // namespace
