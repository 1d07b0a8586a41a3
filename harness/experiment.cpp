// run_experiment: every requested model trained on one dataset, on the
// run's threads; run_experiments: a sweep's configurations that share their
// training, each model trained once and evaluated on every one.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "harness/train.h"

namespace vg {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// run_experiment on the dataset `make_data` gives, every model also evaluated
// on each of `also` (their training is the data's: same_training), their
// results into (*also_models)[k], in opt.models' order.
RunResult run_on(const RunOptions& opt, const std::function<Dataset()>& make_data, const std::vector<const Dataset*>& also,
                 std::vector<std::vector<ModelResult>>* also_models, const EpochCallback& on_epoch,
                 const std::function<void(const std::string&, Model&, const Dataset&)>& on_trained) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r;
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  // Under match_familiar the matched model trains first, in full; its final
  // validation accuracy is every other model's target. Results keep opt.models' order.
  std::vector<std::string> order = opt.models;
  if (!opt.match_familiar.empty()) {
    const auto it = std::find(order.begin(), order.end(), opt.match_familiar);
    if (it == order.end()) throw std::invalid_argument("match_familiar: model '" + opt.match_familiar + "' is not run");
    std::rotate(order.begin(), it, it + 1);
  }
  // A model keeps at most two threads busy: its training and its evaluations.
  const int workers = std::clamp(opt.threads, 1, std::max(1, 2 * int(order.size())));
  // With several threads (and no matched model to train first) the first
  // training thread starts at once: it prepares its model (primitives created,
  // weights initialised, Adam state allocated) while this thread synthesises the
  // data. One only, so the synthesis keeps a core; the others start after it.
  const bool prepare_early = workers > 1 && opt.match_familiar.empty();

  // Each model trains single-threaded from its own seeded stream, so running
  // them concurrently (opt.threads > 1: one per core) changes no bit. Neither
  // does evaluating each epoch on another thread (the pool): the same
  // arithmetic on a copy of the weights. What the caller sees of a trained
  // model (on_trained) comes in training order all the same, and epoch reports
  // one at a time. A thread waiting for its turn helps with the evaluations.
  EvalPool pool;
  std::mutex report_mu;
  size_t turn = 0;                         // the index in `order` whose on_trained is next (pool.update)
  std::vector<char> reported(order.size());  // on_trained done, or the model failed
  std::vector<std::vector<ModelResult>> results(order.size());  // per model: data's, then also's
  enum class DataState { pending, ready, failed } data_state = DataState::pending;  // pool.update
  auto pass_turn = [&](size_t i) {
    pool.update([&] {
      reported[i] = 1;
      while (turn < order.size() && reported[turn]) ++turn;
    });
  };
  // Trains order[i] on the model `prepare` gives (which may throw what
  // preparing it threw: the model then fails like one whose training did).
  auto train = [&](size_t i, double target, const std::function<PreparedModel()>& prepare) {
    const std::string& m = order[i];
    const auto tm = std::chrono::steady_clock::now();
    TrainConfig tc = opt.train;
    const bool matched = !opt.match_familiar.empty() && m == opt.match_familiar;
    if (target > 0 && !matched) {
      tc.stop = stop_at_accuracy(target);
      tc.stop_target = target;
    }
    auto take_turn = [&] {  // once every earlier model has been reported (or failed)
      pool.help_until([&] { return turn == i; });
    };
    try {
      EpochCallback epoch;
      if (on_epoch)
        epoch = [&](const std::string& name, const EpochStats& e) {
          std::lock_guard<std::mutex> lock(report_mu);
          on_epoch(name, e);
        };
      results[i] = train_and_evaluate(
          prepare(), r.data, also, tc, epoch,
          [&](Model& model) {
            take_turn();
            if (on_trained) on_trained(m, model, r.data);
            pass_turn(i);
          },
          workers > 1 ? &pool : nullptr);
      // Interrupted, it was not reported (on_trained): the models after it go on.
      if (results[i].front().interrupted) pass_turn(i);
      // A model fit in one pass (no history) has no training to stop.
      for (ModelResult& res : results[i])
        if (target > 0 && !matched && !res.history.empty()) res.stop_target = target;
    } catch (const std::exception& e) {
      pass_turn(i);  // the models after it are reported without it
      if (!opt.keep_going) throw;
      ModelResult failed;
      failed.name = m;
      failed.familiar = failed.heldout = failed.drop = NAN;
      failed.error = *e.what() ? e.what() : "unknown error";
      failed.train_s = seconds_since(tm);
      results[i].assign(1 + also.size(), failed);
    }
  };
  // The data's shape, known before it is made: the models are built for it.
  const ImageShape shape = image_shape(dc);
  auto prepare_now = [&](size_t i) {
    return [&, i] { return prepare_model(order[i], opt.train, shape); };
  };

  // The training threads (workers > 1). A model that fails (keep_going off)
  // makes the run fail; the others finish first. A worker with no model left
  // helps the others with their evaluations.
  std::atomic<size_t> next{0};
  size_t finished = 0;  // models trained (pool.update)
  double target = opt.stop_at_familiar;
  std::vector<std::exception_ptr> errors(order.size());
  std::vector<std::thread> pool_threads;
  auto start_worker = [&] {
    pool_threads.emplace_back([&] {
      omp_set_num_threads(1);
      for (size_t i; (i = next.fetch_add(1)) < order.size();) {
        // Prepared before the data is read (an error in it fails the model
        // in train, as one in training would).
        std::optional<PreparedModel> ready;
        std::exception_ptr prepare_error;
        try {
          ready = prepare_model(order[i], opt.train, shape);
        } catch (...) {
          prepare_error = std::current_exception();
        }
        pool.wait_until([&] { return data_state != DataState::pending; });
        if (data_state == DataState::failed) return;  // set once, under the lock: no model trains
        try {
          train(i, target, [&] {
            if (prepare_error) std::rethrow_exception(prepare_error);
            return std::move(*ready);
          });
        } catch (...) {
          errors[i] = std::current_exception();
        }
        pool.update([&] { ++finished; });
      }
      pool.help_until([&] { return finished == order.size(); });
    });
  };
  // However this thread leaves (the data failed to synthesise, a check threw),
  // the workers end first: told the data will not come, or after their models.
  struct JoinWorkers {
    EvalPool& pool;
    DataState& state;
    std::vector<std::thread>& threads;
    ~JoinWorkers() {
      pool.update([&] {
        if (state == DataState::pending) state = DataState::failed;
      });
      for (std::thread& t : threads) t.join();
    }
  } join_workers{pool, data_state, pool_threads};
  if (prepare_early) start_worker();

  r.data = make_data();
  // The synthesis's OpenMP workers would spin for a while after its last loop
  // (libgomp's default wait policy) on the cores the models are about to train
  // on: released here (a no-op with one thread; docs/performance.md#the-datasets-threads).
  omp_pause_resource_all(omp_pause_soft);
  r.dataset_s = seconds_since(t0);
  if ((opt.stop_at_familiar > 0 || !opt.match_familiar.empty()) && r.data.validation.size() == 0)
    throw std::invalid_argument("stopping at a familiar accuracy needs a validation split (DataConfig::n_val_per_combo)");
  // image_shape must say what make_dataset makes, in every split the models read.
  const Dataset& d = r.data;
  for (const Split* s : {&d.train, &d.familiar, &d.heldout, &d.circle, &d.validation, &d.axis_sweep})
    if (s->size() > 0 && s->shape() != shape)
      throw std::logic_error("the dataset has images of " + s->shape().text() + ", image_shape said " + shape.text());
  pool.update([&] { data_state = DataState::ready; });

  // Under match_familiar the matched model trains first, alone; its final
  // validation accuracy is every other model's target. On this thread too,
  // every model trains on one thread (restored after).
  struct OneThread {
    int saved = omp_get_max_threads();
    OneThread() { omp_set_num_threads(1); }
    ~OneThread() { omp_set_num_threads(saved); }
  } one_thread;
  if (!opt.match_familiar.empty()) {
    next = 1;
    train(0, 0, prepare_now(0));
    target = results[0][0].error.empty() ? results[0][0].validation : NAN;  // failed: the others train to the cap
    finished = 1;
  }
  if (workers <= 1) {
    for (size_t i = next; i < order.size(); ++i) train(i, target, prepare_now(i));
  } else {
    while (int(pool_threads.size()) < workers) start_worker();
    for (std::thread& t : pool_threads) t.join();
    pool_threads.clear();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
  if (also_models) also_models->assign(also.size(), {});
  for (const std::string& m : opt.models)
    for (std::vector<ModelResult>& res : results)
      if (res.front().name == m) {
        r.models.push_back(std::move(res.front()));
        for (size_t k = 0; k < also.size() && also_models; ++k) (*also_models)[k].push_back(std::move(res[k + 1]));
      }
  r.total_s = seconds_since(t0);
  return r;
}
}  // namespace

RunResult run_experiment(const RunOptions& opt, const EpochCallback& on_epoch,
                         const std::function<void(const std::string&, Model&, const Dataset&)>& on_trained) {
  DataConfig dc = opt.data;
  dc.seed = opt.train.seed;
  return run_on(opt, [&] { return make_dataset(dc); }, {}, nullptr, on_epoch, on_trained);
}

std::vector<RunResult> run_experiments(const std::vector<RunOptions>& opts, int* trainings) {
  // Every dataset first (one that cannot be made is that configuration's
  // error), then into groups by training: each dataset joins the first group
  // whose dataset it trains the same as.
  std::vector<RunResult> out(opts.size());
  std::vector<std::vector<size_t>> groups;
  for (size_t k = 0; k < opts.size(); ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    try {
      DataConfig dc = opts[k].data;
      dc.seed = opts[k].train.seed;
      out[k].data = make_dataset(dc);
    } catch (const std::exception& e) {
      out[k].error = *e.what() ? e.what() : "unknown error";
      continue;
    }
    out[k].dataset_s = seconds_since(t0);
    auto g = std::find_if(groups.begin(), groups.end(), [&](const std::vector<size_t>& grp) {
      return same_training(out[grp.front()].data, out[k].data);
    });
    if (g == groups.end()) groups.push_back({k});
    else g->push_back(k);
  }
  if (trainings) *trainings = int(groups.size());
  for (const std::vector<size_t>& grp : groups) {
    std::vector<const Dataset*> also;
    for (size_t j = 1; j < grp.size(); ++j) also.push_back(&out[grp[j]].data);
    std::vector<std::vector<ModelResult>> also_models;
    const size_t lead = grp.front();
    const double dataset_s = out[lead].dataset_s;
    Dataset data = std::move(out[lead].data);
    out[lead] = run_on(opts[lead], [&] { return std::move(data); }, also, &also_models, {}, {});
    out[lead].dataset_s = dataset_s;
    for (size_t j = 1; j < grp.size(); ++j) out[grp[j]].models = std::move(also_models[j - 1]);
  }
  return out;
}

}  // namespace vg
