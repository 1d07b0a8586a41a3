// The worker ranks' side of an MPI sweep (interface: harness/sweep_runner.h;
// what the ranks say to each other: harness/sweep_runner_internal.h): a cell's
// rows as they travel to rank 0, serving rank 0's groups, and sitting out or
// being dismissed when a rank fails before the sweep starts. Rank 0's side is
// run_sweep's, in sweep_runner.cpp.
#include "harness/sweep_runner.h"

#include <tbb/concurrent_queue.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "harness/output.h"
#include "harness/sweep_runner_internal.h"

namespace vg {

nlohmann::json rows_json(const std::vector<CellRow>& rows) {
  auto real = [](double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); };
  nlohmann::json out = nlohmann::json::array();
  for (const CellRow& r : rows) {
    nlohmann::json acc = nlohmann::json::array(), dist = nlohmann::json::array(), traj = nlohmann::json::array();
    for (double v : r.axis_acc) acc.push_back(real(v));
    for (double v : r.axis_dist) dist.push_back(real(v));
    for (const TrajectoryPoint& t : r.trajectory)
      traj.push_back({t.epoch, t.step, real(t.validation_error), real(t.familiar_error), real(t.heldout_error)});
    const Provenance& p = r.provenance;
    out.push_back({{"cell", r.cell}, {"model", r.model}, {"status", r.status}, {"reason", r.reason},
                   {"familiar", real(r.familiar)}, {"heldout", real(r.heldout)}, {"drop", real(r.drop)},
                   {"seconds", r.seconds}, {"n_params", r.n_params}, {"steps", r.steps},
                   {"validation", real(r.validation)}, {"axis_acc", acc}, {"axis_dist", dist}, {"trajectory", traj},
                   {"provenance", {p.commit, p.dirty, p.compiler, p.cpu, p.isa, p.host}}});
  }
  return out;
}

std::vector<CellRow> rows_from_json(const nlohmann::json& j, const SweepPlan& plan) {
  auto real = [](const nlohmann::json& v) { return v.is_null() ? double(NAN) : v.get<double>(); };
  std::vector<CellRow> rows;
  for (const nlohmann::json& x : j) {
    const int id = x.at("cell").get<int>();
    if (id < 0 || id >= int(plan.cells.size())) throw std::runtime_error("a worker sent cell " + std::to_string(id) + ", not in the plan");
    const SweepCell& c = plan.cells[size_t(id)];
    CellRow r{c.id, c.seed, c.gap, c.true_gap, c.grid, x.at("model").get<std::string>(), x.at("status").get<std::string>(),
              x.at("reason").get<std::string>(), real(x.at("familiar")), real(x.at("heldout")), real(x.at("drop")),
              x.at("seconds").get<double>(), x.at("n_params").get<size_t>(), {}, {}};
    r.axis = c.axis;
    r.unit = c.unit;
    r.steps = x.at("steps").get<long>();
    r.validation = real(x.at("validation"));
    for (const auto& v : x.at("axis_acc")) r.axis_acc.push_back(real(v));
    for (const auto& v : x.at("axis_dist")) r.axis_dist.push_back(real(v));
    for (const auto& t : x.at("trajectory"))
      r.trajectory.push_back({t.at(0).get<int>(), t.at(1).get<long>(), real(t.at(2)), real(t.at(3)), real(t.at(4))});
    const auto& p = x.at("provenance");
    r.provenance = {p.at(0).get<std::string>(), p.at(1).get<std::string>(), p.at(2).get<std::string>(),
                    p.at(3).get<std::string>(), p.at(4).get<std::string>(), p.at(5).get<std::string>()};
    rows.push_back(std::move(r));
  }
  return rows;
}

void dismiss_workers(Cluster& cluster, int code) {
  for (int r = 1; r < cluster.size(); ++r) cluster.send(r, kGo, std::to_string(code));
}

bool sit_out_sweep(Cluster& cluster) {
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  if (tag != kGo || msg != "0") return false;
  cluster.send(0, kHello, "0");  // no slots: rank 0 hands this rank nothing
  return true;
}

int serve_sweep(const SweepPlan& plan, Cluster& cluster) {
  // An interrupt ends a worker without a word: it writes nothing, and rank 0
  // reports how far the sweep got.
  end_silently_on_interrupt();
  std::string msg;
  int src = 0, tag = 0;
  while (!cluster.poll(&src, &tag, &msg)) std::this_thread::sleep_for(kPollFloor);
  // Dismissed: rank 0 has said why and exits with the code; a worker's own
  // non-zero exit would make the launcher kill rank 0 mid-sentence.
  if (tag != kGo || msg != "0") return 0;

  // The slots run on TBB on a thread of their own; this thread talks to rank 0.
  tbb::concurrent_bounded_queue<std::string> inbox;         // a group's cell ids ("-1": the slot ends)
  tbb::concurrent_queue<std::string> outbox;  // finished cells
  std::mutex out_mu;                           // a finished cell wakes this thread
  std::condition_variable out_cv;
  const int jobs = plan.jobs;
  std::thread slots([&] {
    std::deque<Group> held;  // the groups taken (run_slots holds pointers to them)
    std::mutex held_mu;
    auto take = [&]() -> const Group* {
      std::string ids;
      inbox.pop(ids);
      if (ids == "-1") return nullptr;
      Group g;
      for (const std::string& id : split(ids, ',')) g.push_back(&plan.cells[size_t(std::stoi(id))]);
      std::lock_guard<std::mutex> lock(held_mu);
      held.push_back(std::move(g));
      return &held.back();
    };
    auto land = [&](GroupResult r) {
      {
        std::lock_guard<std::mutex> lock(out_mu);
        outbox.push("{\"trainings\":" + std::to_string(r.trainings) + ",\"models\":" + std::to_string(r.models) +
                    ",\"rows\":" + rows_json(r.rows).dump() + "}");
      }
      out_cv.notify_one();
    };
    run_slots(jobs, take, land, [&](const Group& g) { return run_group_result(plan, g); });
  });
  cluster.send(0, kHello, std::to_string(jobs));
  int ended = 0;
  // Time from asking for a cell to getting it, per ask (the dispatch cost).
  std::deque<std::chrono::steady_clock::time_point> asked(size_t(jobs), std::chrono::steady_clock::now());
  double last_wait = 0;
  int awaiting = jobs;  // cells asked for and not yet answered
  try {
    while (ended < jobs) {
      std::string result;
      while (outbox.try_pop(result)) {
        cluster.send(0, kResult, "{\"wait_s\":" + std::to_string(last_wait) + "," + result.substr(1));
        asked.push_back(std::chrono::steady_clock::now());
        ++awaiting;
      }
      if (cluster.poll(&src, &tag, &msg)) {
        if (tag == kGo) {  // rank 0 failed (and said so): end after the cells in hand
          for (int k = 0; k < jobs; ++k) inbox.push("-1");
          slots.join();
          return 0;
        }
        if (tag != kCell) throw std::runtime_error("rank 0 sent an unknown message (tag " + std::to_string(tag) + ")");
        for (const std::string& id : split(msg, ','))
          if (id != "-1" && (id.empty() || id.find_first_not_of("0123456789") != std::string::npos || std::stoul(id) >= plan.cells.size()))
            throw std::runtime_error("rank 0 handed out cells " + msg + ", not in this rank's plan");
        last_wait = std::chrono::duration<double>(std::chrono::steady_clock::now() - asked.front()).count();
        asked.pop_front();
        --awaiting;
        ended += msg == "-1";
        inbox.push(msg);
      } else if (awaiting > 0) {
        std::this_thread::sleep_for(kPollFloor);  // a reply is due within rank 0's period
      } else {
        // Every slot is busy: sleep until one finishes (MPI is not polled
        // meanwhile; a dismissal waits for the timeout).
        std::unique_lock<std::mutex> lock(out_mu);
        out_cv.wait_for(lock, std::chrono::milliseconds(50), [&] { return !outbox.empty(); });
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "viewgap sweep (rank %d): error: %s\n", cluster.rank(), e.what());
    cluster.abort(1);
  }
  slots.join();
  // The last results of ended slots are already sent: a slot ends only after
  // its last cell's result, which was sent before rank 0 answered it with -1.
  return 0;
}

}  // namespace vg
