// Short training runs: both models learn well above chance, results are
// reproducible, and NaN stops a run with a message naming where.
#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "harness/evaluate.h"
#include "harness/train.h"
#include "models/capsnet.h"
#include "models/cnn.h"
#include "models/registry.h"
#include "tests/step_helpers.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::DecliningHelper;
using test::LateHelper;
using test::ThreadHelper;

RunOptions small_run() {
  RunOptions o;
  o.train.seed = 1;
  o.train.n_epochs = 4;
  o.models = {"caps", "cnn"};
  return o;
}

TEST(Training, BothModelsLearnWellAboveChance) {
  const RunResult r = run_experiment(small_run());
  ASSERT_EQ(r.models.size(), 2u);
  for (const ModelResult& m : r.models) {
    // Chance is 0.2; four epochs on 450 images reach far above it.
    EXPECT_GT(m.familiar, 0.6) << m.name;
    EXPECT_GT(m.heldout, 0.3) << m.name;
    EXPECT_LT(m.history.back().loss, m.history.front().loss) << m.name;
    EXPECT_NEAR(m.drop, m.familiar - m.heldout, 1e-12);
    EXPECT_EQ(m.circle_acc.size(), 36u);
    // The circle split includes the training azimuths: accuracy there is high.
    EXPECT_GT(m.circle_acc[0], 0.5) << m.name;
    // Class activations are measured for the model that has class capsules only.
    if (m.name == "caps") {
      EXPECT_GE(m.act_accuracy, 0.0);
      EXPECT_LE(m.act_accuracy, 1.0);
      EXPECT_GT(m.act_true, 0.0);
      EXPECT_LT(m.act_other, 1.0);
    } else {
      EXPECT_TRUE(std::isnan(m.act_accuracy)) << m.name;
    }
  }
  EXPECT_EQ(r.data.gap_deg, 30.0);
}

TEST(Training, SameSeedAndThreadsGiveIdenticalResults) {
  RunOptions o = small_run();
  o.train.n_epochs = 2;
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const RunResult a = run_experiment(o), b = run_experiment(o);
    for (size_t k = 0; k < a.models.size(); ++k) {
      for (size_t e = 0; e < a.models[k].history.size(); ++e) {
        EXPECT_EQ(a.models[k].history[e].loss, b.models[k].history[e].loss) << a.models[k].name;
        EXPECT_EQ(a.models[k].history[e].heldout, b.models[k].history[e].heldout);
      }
      EXPECT_EQ(a.models[k].circle_acc, b.models[k].circle_acc);
    }
  }
  omp_set_num_threads(saved);
}

// With threads, each epoch is evaluated on another thread, on a copy of the
// model holding that epoch's weights: every number is the same bit as on one
// thread, the per-epoch circle included, for every kind of model (a fitted
// one, nn1, has no epochs to hand off). Three threads: more than the models
// need to train, so evaluations run beside both.
TEST(Training, EvaluationsOnOtherThreadsGiveTheSameResults) {
  RunOptions o = small_run();
  o.train.n_epochs = 3;
  o.train.circle_every_epoch = true;
  o.data.n_val_per_combo = 1;  // the validation split's trajectory too
  o.models = {"caps", "cnn", "linear", "nn1"};
  const RunResult one = run_experiment(o);
  o.threads = 3;
  const RunResult three = run_experiment(o);
  ASSERT_EQ(one.models.size(), three.models.size());
  for (size_t k = 0; k < one.models.size(); ++k) {
    const ModelResult &a = one.models[k], &b = three.models[k];
    SCOPED_TRACE(a.name);
    ASSERT_EQ(a.history.size(), b.history.size());
    EXPECT_EQ(a.history.size(), a.name == "nn1" ? 0u : 3u);
    for (size_t e = 0; e < a.history.size(); ++e) {
      EXPECT_EQ(a.history[e].epoch, b.history[e].epoch);
      EXPECT_EQ(a.history[e].loss, b.history[e].loss);
      EXPECT_EQ(a.history[e].familiar, b.history[e].familiar);
      EXPECT_EQ(a.history[e].heldout, b.history[e].heldout);
      EXPECT_EQ(a.history[e].validation, b.history[e].validation);
      EXPECT_EQ(a.history[e].step, b.history[e].step);
    }
    EXPECT_EQ(a.validation, b.validation);
    EXPECT_EQ(a.circle_history, b.circle_history);
    EXPECT_EQ(a.circle_history.size(), a.history.size());
    EXPECT_EQ(a.step_loss, b.step_loss);
    EXPECT_EQ(a.familiar, b.familiar);
    EXPECT_EQ(a.heldout, b.heldout);
    EXPECT_EQ(a.heldout_per_class, b.heldout_per_class);
    EXPECT_EQ(a.circle_acc, b.circle_acc);
    if (!std::isnan(a.act_true)) {
      EXPECT_EQ(a.act_true, b.act_true);
    }
  }
}

// --check-sample: each check scores a fixed subsample of each split, the same
// bits on this thread or the pool's; the training and its final results are
// those of a training whose checks scored every image, and a sample at least
// as large as every split is every image.
TEST(Training, ACheckSampleScoresASubsampleAndLeavesTheResultsAsTheyWere) {
  RunOptions o = small_run();
  o.train.n_epochs = 2;
  o.data.n_val_per_combo = 1;
  const RunResult plain = run_experiment(o);
  const int n = 7;
  o.train.check_sample = n;
  const RunResult one = run_experiment(o);
  o.threads = 2;
  const RunResult two = run_experiment(o);
  o.threads = 1;
  o.train.check_sample = 1 << 20;
  const RunResult whole = run_experiment(o);
  for (size_t k = 0; k < plain.models.size(); ++k) {
    const ModelResult &p = plain.models[k], &a = one.models[k], &b = two.models[k], &w = whole.models[k];
    SCOPED_TRACE(a.name);
    ASSERT_GT(p.history.size(), 0u);
    EXPECT_EQ(a.step_loss, p.step_loss);
    EXPECT_EQ(a.familiar, p.familiar);
    EXPECT_EQ(a.heldout, p.heldout);
    EXPECT_EQ(a.validation, p.validation);
    EXPECT_EQ(a.heldout_per_class, p.heldout_per_class);
    EXPECT_EQ(a.circle_acc, p.circle_acc);
    EXPECT_EQ(a.axis_acc, p.axis_acc);
    ASSERT_EQ(a.history.size(), p.history.size());
    ASSERT_EQ(b.history.size(), p.history.size());
    ASSERT_EQ(w.history.size(), p.history.size());
    bool differs = false;
    for (size_t e = 0; e < a.history.size(); ++e) {
      EXPECT_EQ(a.history[e].loss, p.history[e].loss);
      for (double x : {a.history[e].familiar, a.history[e].heldout, a.history[e].validation})
        EXPECT_EQ(std::round(x * n), x * n) << x << " is no count of " << n << " images";
      differs = differs || a.history[e].familiar != p.history[e].familiar || a.history[e].heldout != p.history[e].heldout;
      EXPECT_EQ(b.history[e].familiar, a.history[e].familiar);
      EXPECT_EQ(b.history[e].heldout, a.history[e].heldout);
      EXPECT_EQ(b.history[e].validation, a.history[e].validation);
      EXPECT_EQ(w.history[e].familiar, p.history[e].familiar);
      EXPECT_EQ(w.history[e].heldout, p.history[e].heldout);
      EXPECT_EQ(w.history[e].validation, p.history[e].validation);
    }
    EXPECT_TRUE(differs) << "seven images scored as every image did at every check";
  }
}

// The subsample: n of the split's images without replacement, in their order,
// each with its own label and views; fixed by (seed, which); uniform.
TEST(Training, ACheckSampleIsAFixedUniformSubsampleInOrder) {
  Split s;
  s.channels = 1;
  s.side = 2;
  s.classes = 3;
  for (int i = 0; i < 20; ++i) {
    s.images.insert(s.images.end(), 4, float(i));
    s.labels.push_back(i % 3);
    s.azimuth.push_back(float(10 * i));
    s.axis.push_back(float(i));
  }
  const Split a = check_sample_split(s, 5, 42, 1);
  ASSERT_EQ(a.size(), 5);
  ASSERT_EQ(a.images.size(), 20u);
  EXPECT_TRUE(a.elevation.empty());
  for (int j = 0; j < 5; ++j) {
    const int v = int(a.image(j)[0]);
    EXPECT_EQ(a.image(j)[3], float(v));
    EXPECT_EQ(a.labels[size_t(j)], v % 3);
    EXPECT_EQ(a.azimuth[size_t(j)], float(10 * v));
    EXPECT_EQ(a.axis[size_t(j)], float(v));
    if (j > 0) {
      EXPECT_LT(a.image(j - 1)[0], float(v));
    }
  }
  EXPECT_EQ(check_sample_split(s, 5, 42, 1).images, a.images);
  EXPECT_NE(check_sample_split(s, 5, 42, 2).images, a.images);
  EXPECT_NE(check_sample_split(s, 5, 43, 1).images, a.images);
  EXPECT_EQ(check_sample_split(s, 20, 42, 1).images, s.images);
  EXPECT_EQ(check_sample_split(s, 99, 42, 1).labels, s.labels);
  // Each image is drawn with probability 5/20: over 4,000 seeds, 1,000 times
  // each, give or take ~5 standard deviations (27).
  std::vector<int> count(20, 0);
  for (uint64_t seed = 0; seed < 4000; ++seed) {
    const Split d = check_sample_split(s, 5, seed, 0);
    for (int j = 0; j < 5; ++j) ++count[size_t(d.image(j)[0])];
  }
  for (int i = 0; i < 20; ++i) EXPECT_NEAR(count[size_t(i)], 1000, 140) << "image " << i;
}

// --eval-every: checks at the multiples of the interval that end no epoch, on
// this thread or the pool's the same bits; the epochs' records are those of a
// training without checks (the interval divides the steps of an epoch, so the
// epoch ends are among its multiples).
TEST(Training, ChecksInsideAnEpochLeaveTheEpochsAsTheyWere) {
  RunOptions o = small_run();
  o.train.n_epochs = 2;
  o.data.n_val_per_combo = 1;
  o.models = {"caps", "cnn"};
  const RunResult plain = run_experiment(o);
  const long spe = plain.models[0].steps / 2;
  ASSERT_EQ(spe % 3, 0) << "the interval must divide an epoch's " << spe << " steps";
  o.train.eval_every = spe / 3;
  const RunResult one = run_experiment(o);
  o.threads = 2;
  const RunResult two = run_experiment(o);
  for (size_t k = 0; k < plain.models.size(); ++k) {
    const ModelResult &p = plain.models[k], &a = one.models[k], &b = two.models[k];
    SCOPED_TRACE(a.name);
    EXPECT_TRUE(p.checks.empty());
    ASSERT_EQ(a.history.size(), p.history.size());
    for (size_t e = 0; e < a.history.size(); ++e) {
      EXPECT_EQ(a.history[e].loss, p.history[e].loss);
      EXPECT_EQ(a.history[e].familiar, p.history[e].familiar);
      EXPECT_EQ(a.history[e].heldout, p.history[e].heldout);
      EXPECT_EQ(a.history[e].validation, p.history[e].validation);
      EXPECT_EQ(a.history[e].step, p.history[e].step);
    }
    EXPECT_EQ(a.step_loss, p.step_loss);
    EXPECT_EQ(a.heldout, p.heldout);
    // Two checks an epoch (at a third and two thirds of it), the epoch under way and its step.
    ASSERT_EQ(a.checks.size(), 4u);
    for (size_t c = 0; c < 4; ++c) {
      EXPECT_EQ(a.checks[c].epoch, int(c / 2) + 1);
      EXPECT_EQ(a.checks[c].step, long(c / 2) * spe + long(c % 2 + 1) * (spe / 3));
      EXPECT_FALSE(std::isnan(a.checks[c].validation));
    }
    ASSERT_EQ(b.checks.size(), a.checks.size());
    for (size_t c = 0; c < a.checks.size(); ++c) {
      EXPECT_EQ(b.checks[c].step, a.checks[c].step);
      EXPECT_EQ(b.checks[c].loss, a.checks[c].loss);
      EXPECT_EQ(b.checks[c].familiar, a.checks[c].familiar);
      EXPECT_EQ(b.checks[c].heldout, a.checks[c].heldout);
      EXPECT_EQ(b.checks[c].validation, a.checks[c].validation);
    }
  }
}

// --eval-until: --eval-every's checks up to its step only, the epoch ends after
// it as before; the training is the same bits.
TEST(Training, ChecksStopAtEvalUntil) {
  RunOptions o = small_run();
  o.train.n_epochs = 2;
  o.data.n_val_per_combo = 1;
  o.models = {"cnn"};
  o.train.eval_every = 1;
  const RunResult all = run_experiment(o);
  const long spe = all.models[0].steps / 2;
  ASSERT_GT(spe, 3);
  o.train.eval_until = spe + 1;  // the first epoch's checks and the second's first
  const RunResult until = run_experiment(o);
  const ModelResult &a = all.models[0], &u = until.models[0];
  EXPECT_EQ(u.step_loss, a.step_loss);
  EXPECT_EQ(u.heldout, a.heldout);
  ASSERT_EQ(u.history.size(), a.history.size());
  for (size_t e = 0; e < u.history.size(); ++e) EXPECT_EQ(u.history[e].validation, a.history[e].validation);
  ASSERT_EQ(u.checks.size(), size_t(spe));  // steps 1..spe-1, then spe+1
  for (size_t c = 0; c < u.checks.size(); ++c) {
    EXPECT_EQ(u.checks[c].step, a.checks[c].step);
    EXPECT_EQ(u.checks[c].validation, a.checks[c].validation);
  }
  EXPECT_EQ(u.checks.back().step, spe + 1);
  EXPECT_EQ(u.checks.back().epoch, 2);
}

// --model-eval-every: a model's own checks, beside --eval-every's, at the
// multiples of its interval up to its step; the other models check as before;
// every training is the same bits.
TEST(Training, AModelsOwnChecksAreItsAlone) {
  RunOptions o = small_run();
  o.train.n_epochs = 2;
  o.data.n_val_per_combo = 1;
  o.models = {"caps", "cnn"};
  const long spe = run_experiment(o).models[0].steps / 2;
  ASSERT_GT(spe - 1, 3) << "cnn's own checks (steps 1 to 3) must come before the shared ones";
  o.train.eval_every = spe - 1;  // a check one step before the first epoch's end and two before the second's, for both
  const RunResult shared = run_experiment(o);
  o.train.model_checks["cnn"] = CheckSpan{1, 3};  // and cnn's own at steps 1, 2 and 3
  const RunResult own = run_experiment(o);
  for (size_t k = 0; k < own.models.size(); ++k) {
    const ModelResult &s = shared.models[k], &m = own.models[k];
    SCOPED_TRACE(m.name);
    EXPECT_EQ(m.step_loss, s.step_loss);
    EXPECT_EQ(m.heldout, s.heldout);
    ASSERT_EQ(m.history.size(), s.history.size());
    for (size_t e = 0; e < m.history.size(); ++e) EXPECT_EQ(m.history[e].validation, s.history[e].validation);
    std::vector<long> steps, expected = {spe - 1, 2 * spe - 2};
    for (const EpochStats& c : m.checks) steps.push_back(c.step);
    if (m.name == "cnn") expected.insert(expected.begin(), {1, 2, 3});
    EXPECT_EQ(steps, expected);
    // A check at a step both schedules hold is one check, the same as the shared schedule's.
    for (const EpochStats& c : m.checks)
      for (const EpochStats& d : s.checks) {
        if (c.step == d.step) {
          EXPECT_EQ(c.validation, d.validation);
        }
      }
  }
  // Its own checks alone, without --eval-every.
  o.train.eval_every = 0;
  const RunResult alone = run_experiment(o);
  EXPECT_TRUE(alone.models[0].checks.empty());
  ASSERT_EQ(alone.models[1].checks.size(), 3u);
  EXPECT_EQ(alone.models[1].checks.back().step, 3);
}

// With two threads or more, the first model is prepared (made, initialised,
// its Trainer built) on its training thread while the data is synthesised.
// What fails around that overlap fails as it does on one thread: a model that
// cannot be made is recorded under keep_going (the others train, to the same
// bits) or fails the run; a dataset that cannot be made, or a check after it,
// fails the run with the preparing thread joined (no hang, no std::terminate).
TEST(Training, FailuresAroundTheEarlyPreparedModelAreThoseOfOneThread) {
  RunOptions o = small_run();
  o.train.n_epochs = 1;
  o.models = {"nosuch", "cnn"};  // "nosuch" is prepared first, and fails there
  std::vector<double> cnn_loss;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    o.threads = threads;
    o.keep_going = true;
    const RunResult r = run_experiment(o);
    ASSERT_EQ(r.models.size(), 2u);
    EXPECT_NE(r.models[0].error.find("unknown model 'nosuch'"), std::string::npos) << r.models[0].error;
    EXPECT_TRUE(std::isnan(r.models[0].familiar));
    EXPECT_EQ(r.models[1].error, "");
    ASSERT_EQ(r.models[1].history.size(), 1u);
    if (cnn_loss.empty()) cnn_loss = r.models[1].step_loss;
    else EXPECT_EQ(r.models[1].step_loss, cnn_loss);
    o.keep_going = false;
    EXPECT_THROW(run_experiment(o), std::invalid_argument);
  }
  o.models = {"caps", "cnn"};
  o.threads = 2;
  RunOptions no_data = o;  // smallNORB files that are not there
  no_data.data.norb = NorbConfig{};
  no_data.data.norb->dir = vg::test::temp_dir() + "viewgap_no_such_norb_dir";
  std::atomic<int> epochs{0}, trained{0};  // none: no model trains without its data
  EXPECT_THROW(run_experiment(
                   no_data, [&](const std::string&, const EpochStats&) { ++epochs; },
                   [&](const std::string&, Model&, const Dataset&) { ++trained; }),
               NorbError);
  EXPECT_EQ(epochs, 0);
  EXPECT_EQ(trained, 0);
  RunOptions no_validation = o;  // the check after the data: a stop rule needs a validation split
  no_validation.stop_at_familiar = 0.9;
  EXPECT_THROW(run_experiment(no_validation), std::invalid_argument);
}

// `steps` training steps of `name` (batch 32) from its seeded initialisation,
// on one OpenMP thread as in a run: the weights after them.
std::vector<float> weights_after_steps(const Dataset& d, const std::string& name, StepHelper* helper,
                                       int steps, const ModelOptions& opts = {}) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  std::unique_ptr<Model> m = make_model(name, opts, 32);
  m->init(3);
  Trainer trainer(*m, AdamConfig{}, 32);
  trainer.set_helper(helper);
  const int n = d.train.size();
  for (int s = 0; s < steps; ++s) {
    const int at = (s * 32) % (n - 32);
    const double loss = trainer.step(d.train.image(at), d.train.labels.data() + at, 32, double(s) / steps);
    EXPECT_TRUE(std::isfinite(loss));
  }
  omp_set_num_threads(saved);
  return m->params().values();
}

// A step's work handed to another thread changes no bit of the weights,
// whoever runs it and whenever: at once, late enough that the step runs it
// itself, or never. The work: weight gradients with their Adam updates
// (Model::weight_gradient: caps' and dr's primary layers, the CNN's hidden
// one, dr's decoder, convcaps' primary layer) and convcaps' ConvCaps layers'
// chunks (routed on either thread in the forward; votes and routing history
// prepared ahead in the backward, models/side_job.h), under both gradient schemes.
TEST(Training, WorkOnAHelperThreadGivesTheSameWeights) {
  const Dataset d = make_dataset(small_run().data);
  const int steps = 6;
  const std::vector<std::pair<std::string, ModelOptions>> cases = {
      {"caps", {}},
      {"cnn", {}},
      {"dr", {}},
      {"convcaps", {{"em-grad", "full"}}},
      {"convcaps", {{"em-grad", "stopgrad"}}}};
  for (const auto& [name, opts] : cases) {
    SCOPED_TRACE(name + (opts.empty() ? "" : " --em-grad " + opts.at("em-grad")));
    const std::vector<float> alone = weights_after_steps(d, name, nullptr, steps, opts);
    for (int delay_us : {0, 100, 3000}) {
      SCOPED_TRACE(delay_us);
      auto helper = std::make_unique<ThreadHelper>(delay_us);
      EXPECT_EQ(weights_after_steps(d, name, helper.get(), steps, opts), alone);
      helper->stop();  // runs what is queued, then joins
      EXPECT_GE(helper->ran.load(), steps);  // the offers reached the thread
    }
    DecliningHelper declining;
    EXPECT_EQ(weights_after_steps(d, name, &declining, steps, opts), alone);
    EXPECT_GE(declining.offers, steps);  // each model offers one or more per step
    LateHelper late;
    EXPECT_EQ(weights_after_steps(d, name, &late, steps, opts), alone);
    EXPECT_GE(late.jobs.size(), size_t(steps));
    for (const auto& job : late.jobs) job();  // the Trainer is gone: each finds its offer claimed
  }
}

// A model shaped like two layers' backward, to pin the helper's ordering
// down: it offers tensor 0's gradient, then (2 ms later, time for any helper
// to be through) reads tensor 0's weights, as a backward-data pass does, and
// releases them; then the same for tensor 1; the reads go into tensor 2's
// gradient. If an offer's Adam update ran before its release (or a release
// freed an offer made after it), a read would see updated weights and the
// step would come out different from one without a helper.
class OfferThenRead final : public Model {
 public:
  OfferThenRead() {
    params_.add("first", 64);
    params_.add("second", 64);
    params_.add("reads", 2);
    params_.allocate();
    scores_.resize(32 * 5);
  }
  std::string name() const override { return "offer_then_read"; }
  void init(uint64_t) override {
    for (int t : {0, 1})
      for (size_t k = 0; k < 64; ++k) params_.value(t)[k] = 0.01f * float(k + t);
  }
  const float* forward(const float*, int B) override {
    for (int k = 0; k < B * 5; ++k)
      scores_[size_t(k)] = params_.value(0)[k % 64] + params_.value(1)[k % 64] + params_.value(2)[k % 2];
    return scores_.data();
  }
  void backward(const float*, int) override {
    for (int t : {0, 1}) {
      weight_gradient(t, t, [this, t] {
        for (int k = 0; k < 64; ++k) params_.grad(t)[k] = 0.1f * float(k + 1 + t);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      float read = 0;
      for (int k = 0; k < 64; ++k) read += params_.value(t)[k];
      release_offered_weights();
      params_.grad(2)[t] = read;
    }
  }
  std::string first_non_finite_layer(int) const override { return ""; }
  std::vector<LayerInfo> layers(int) const override { return {}; }

 private:
  std::vector<float> scores_;
};

TEST(Training, AnOffersAdamUpdateWaitsUntilBackwardReleasesItsWeights) {
  const std::vector<float> images(32 * 1024, 0.f);
  const std::vector<int> labels(32, 0);
  auto train = [&](StepHelper* helper) {
    OfferThenRead m;
    m.init(0);
    Trainer t(m, AdamConfig{}, 32);
    t.set_helper(helper);
    for (int s = 0; s < 3; ++s) t.step(images.data(), labels.data(), 32, 0);
    return m.params().values();
  };
  const std::vector<float> alone = train(nullptr);
  ThreadHelper helper(0);
  EXPECT_EQ(train(&helper), alone);
  helper.stop();
  EXPECT_EQ(helper.ran.load(), 6);
}

// After its first steps (which build the backward primitives and size the
// gradient buffers), a training step allocates nothing of its own, with or
// without a helper to offer work to (one that declines: the offer path
// itself). What remains is inside oneDNN: its execute() builds a map of the
// primitive's arguments on every call (oneDNN 2.6; nothing in its API avoids
// it), the same number every step.
TEST(Training, AStepAllocatesNothingOnceWarm) {
  const Dataset d = make_dataset(small_run().data);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  for (const std::string& name : test::registered_models(/*trained=*/true)) {
    for (bool declining : {false, true}) {
      SCOPED_TRACE(name + (declining ? ", a helper that declines" : ", no helper"));
      std::unique_ptr<Model> m = make_model(name, ModelOptions{}, 32);
      m->init(3);
      DecliningHelper helper;
      Trainer trainer(*m, AdamConfig{}, 32);
      if (declining) trainer.set_helper(&helper);
      size_t onednn_first = 0;
      for (int s = 0; s < 5; ++s) {
        test::attribute_allocations(true);
        const test::Allocations before = test::allocations_on_this_thread();
        trainer.step(d.train.image(32 * s), d.train.labels.data() + 32 * s, 32, 0.1 * s);
        const test::Allocations after = test::allocations_on_this_thread();
        test::attribute_allocations(false);
        const size_t onednn = after.by_onednn - before.by_onednn, ours = after.all - before.all - onednn;
        if (s < 2) continue;
        EXPECT_EQ(ours, 0u) << "step " << s;
        if (s == 2) onednn_first = onednn;
        EXPECT_EQ(onednn, onednn_first) << "step " << s;
      }
      if (declining) {
        EXPECT_GE(helper.offers, name == "linear" ? 0 : 5);  // linear has no layer to offer
      }
    }
  }
  omp_set_num_threads(saved);
}

// Model::prepare_training builds everything a step of that batch needs: the
// first step after it allocates nothing of ours either (without it, the first
// step builds the layers' primitives), and the steps are the same bits.
TEST(Training, APreparedModelsFirstStepAllocatesNothing) {
  const Dataset d = make_dataset(small_run().data);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  for (const std::string& name : test::registered_models(/*trained=*/true)) {
    SCOPED_TRACE(name);
    std::vector<double> losses[2];
    size_t onednn_first[2] = {0, 0};
    for (bool prepared : {false, true}) {
      std::unique_ptr<Model> m = make_model(name, ModelOptions{}, 64);
      m->init(3);
      Trainer trainer(*m, AdamConfig{}, 32);
      if (prepared) m->prepare_training(32);
      for (int s = 0; s < 3; ++s) {
        test::attribute_allocations(true);
        const test::Allocations before = test::allocations_on_this_thread();
        const double loss = trainer.step(d.train.image(32 * s), d.train.labels.data() + 32 * s, 32, 0.1 * s);
        const test::Allocations after = test::allocations_on_this_thread();
        test::attribute_allocations(false);
        losses[prepared].push_back(loss);
        const size_t onednn = after.by_onednn - before.by_onednn, ours = after.all - before.all - onednn;
        if (s == 0) onednn_first[prepared] = onednn;
        if (prepared) {
          EXPECT_EQ(ours, 0u) << "step " << s;
          EXPECT_EQ(onednn, onednn_first[1]) << "step " << s;  // execute's argument maps only
        } else if (s == 0) {
          EXPECT_GT(ours, 0u);  // what prepare_training moves ahead
        }
      }
      losses[prepared].push_back(double(m->params().values()[m->params().count() / 2]));
    }
    EXPECT_EQ(losses[0], losses[1]);
    EXPECT_GT(onednn_first[0], onednn_first[1]);  // unprepared, the first step creates primitives
  }
  omp_set_num_threads(saved);
}

// The first training step (forward, loss, backward) of `model` from its seeded
// initialisation on the first 32 training images: the loss and every gradient.
struct FirstStep {
  double loss = 0;
  std::vector<float> grads;
  std::vector<ParamSet::Tensor> tensors;
};

FirstStep first_step(const Dataset& d, const std::string& model, std::optional<Isa> isa, int threads) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(threads);
  std::unique_ptr<Model> m;
  if (model == "caps") {
    CapsConfig c;
    c.isa = isa;
    m = std::make_unique<CapsNet>(c, 32);
  } else {
    m = std::make_unique<Cnn>(CnnConfig{}, 32);
  }
  m->init(5);
  std::vector<float> dlogits(32 * kNumClasses);
  FirstStep s;
  s.loss = softmax_xent(dlogits.data(), m->forward(d.train.image(0), 32), d.train.labels.data(), 32, kNumClasses);
  m->backward(dlogits.data(), 32);
  s.grads = m->params().grads();
  for (int t = 0; t < m->params().num_tensors(); ++t) s.tensors.push_back(m->params().tensor(t));
  omp_set_num_threads(saved);
  return s;
}

// Two float computations of the same step differ only in rounding. Each float
// operation errs by at most u = 2^-24 relative; a sum of K terms computed in any
// order is within gamma_K = K u / (1 - K u) of the exact sum, relative to the sum
// of the terms' magnitudes, so two orders differ by at most 2 gamma_K of it. The
// longest sum in a step is conv1's weight gradient (K = batch 32 x 16 x 16
// output positions = 8192; the dense layers sum 4096), and a step passes an
// error through at most kDepth layers (forward and back: conv, dense, votes,
// 3 EM iterations, logits, loss), each of which can carry an input error to its
// output at most once more. Bounding the terms' magnitudes by the tensor's
// largest gradient gives, per tensor (and likewise for the loss):
//   |g_a - g_b| <= kDepth * 2 gamma_8192 * max|g|   (about 1.2 % of max|g|).
// A worst-case bound: measured differences are ~1e-6 of max|g|; a wrong kernel
// gives differences of order max|g|.
constexpr double kDepth = 12;
double step_tolerance(double scale) {
  const double u = std::ldexp(1.0, -24), K = 8192;
  return kDepth * 2 * (K * u / (1 - K * u)) * scale;
}

void expect_same_step(const FirstStep& a, const FirstStep& b, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, step_tolerance(std::fabs(a.loss))) << what;
  ASSERT_EQ(a.grads.size(), b.grads.size());
  for (const auto& t : a.tensors) {
    double scale = 0, diff = 0;
    for (size_t k = t.offset; k < t.offset + t.size; ++k) {
      scale = std::max(scale, double(std::fabs(a.grads[k])));
      diff = std::max(diff, double(std::fabs(a.grads[k] - b.grads[k])));
    }
    EXPECT_LE(diff, step_tolerance(scale)) << what << ": gradient of " << t.name << " (max " << scale << ")";
    EXPECT_GT(scale, 0) << what << ": no gradient reaches " << t.name;
  }
}

TEST(Training, FirstStepAgreesAcrossThreadCountsAndKernelIsasToRounding) {
  // oneDNN splits its sums by thread count and our kernel variants round
  // differently, so later steps diverge (the capsule model is chaotic); the
  // first step is where the rounding can be bounded.
  DataConfig dc;
  dc.n_per_combo = 1;
  const Dataset d = make_dataset(dc);
  for (const char* model : {"caps", "cnn"}) {
    const FirstStep ref = first_step(d, model, Isa::scalar, 1);
    expect_same_step(ref, first_step(d, model, Isa::scalar, 2), std::string(model) + ", 2 threads");
    if (std::string(model) != "caps") continue;  // only the capsule model has ISA variants
    for (Isa isa : {Isa::avx2, Isa::avx512, Isa::neon})
      if (isa_supported(isa))
        expect_same_step(ref, first_step(d, model, isa, 1), std::string(model) + ", " + isa_name(isa));
  }
}

TEST(Training, DifferentSeedsGiveDifferentRuns) {
  RunOptions o = small_run();
  o.train.n_epochs = 1;
  o.models = {"cnn"};
  const RunResult a = run_experiment(o);
  o.train.seed = 2;
  const RunResult b = run_experiment(o);
  EXPECT_NE(a.models[0].history[0].loss, b.models[0].history[0].loss);
}

TEST(Training, NonFiniteInputStopsTheRunNamingModelLayerAndEpoch) {
  DataConfig dc;
  dc.n_per_combo = 1;
  Dataset d = make_dataset(dc);
  for (float& p : d.train.images) p = NAN;
  TrainConfig tc;
  tc.n_epochs = 2;
  for (const char* name : {"caps", "cnn"}) {
    try {
      train_and_evaluate(name, d, tc);
      ADD_FAILURE() << name << ": expected NonFiniteError";
    } catch (const NonFiniteError& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(name), std::string::npos) << msg;
      EXPECT_NE(msg.find("epoch 1"), std::string::npos) << msg;
      EXPECT_NE(msg.find("conv1"), std::string::npos) << msg;
    }
  }
}


}  // namespace
}  // namespace vg

namespace vg {
namespace {

// A spread-loss model's epochs carry their loss at the final margin: never
// below the annealed one (each term grows with the margin), equal to it
// where the margin does not anneal; another loss's carry none.
TEST(Training, ASpreadLossEpochReportsItsLossAtTheFinalMargin) {
  DataConfig dc;
  dc.n_per_combo = 1;
  const Dataset d = make_dataset(dc);
  TrainConfig tc;
  tc.n_epochs = 2;
  tc.seed = 5;
  tc.model["loss"] = "spread";
  const ModelResult annealed = train_and_evaluate("caps", d, tc);
  ASSERT_EQ(annealed.history.size(), 2u);
  for (const EpochStats& e : annealed.history) {
    EXPECT_FLOAT_EQ(float(e.final_margin), 0.9f);
    EXPECT_GT(e.final_margin_loss, e.loss) << e.epoch;
  }
  tc.model["spread-margin"] = "0.9:0.9";
  const ModelResult fixed = train_and_evaluate("caps", d, tc);
  for (const EpochStats& e : fixed.history) EXPECT_EQ(e.final_margin_loss, e.loss) << e.epoch;
  tc.model.clear();
  const ModelResult xent = train_and_evaluate("caps", d, tc);
  for (const EpochStats& e : xent.history) {
    EXPECT_TRUE(std::isnan(e.final_margin_loss)) << e.epoch;
    EXPECT_TRUE(std::isnan(e.final_margin)) << e.epoch;
  }
}

TEST(Training, StopRuleEndsTrainingEarlyWithoutChangingTheStepsBefore) {
  DataConfig dc;
  dc.n_per_combo = 2;
  const Dataset d = make_dataset(dc);
  TrainConfig tc;
  tc.n_epochs = 6;
  tc.seed = 3;
  const ModelResult full = train_and_evaluate("cnn", d, tc);
  EXPECT_FALSE(full.stopped_early);
  EXPECT_EQ(full.steps, long(full.step_loss.size()));
  int asked = 0;
  tc.stop = [&](const StopCheck& c) {
    ++asked;
    EXPECT_EQ(c.step, c.epoch * long((d.train.size() + tc.batch_size - 1) / tc.batch_size));
    return c.epoch == 2;
  };
  const ModelResult early = train_and_evaluate("cnn", d, tc);
  EXPECT_TRUE(early.stopped_early);
  EXPECT_EQ(asked, 2);
  ASSERT_EQ(early.history.size(), 2u);
  // The same steps as the full run up to the stop: the cap, not the stop, sets the schedule.
  ASSERT_LT(early.step_loss.size(), full.step_loss.size());
  for (size_t k = 0; k < early.step_loss.size(); ++k) EXPECT_EQ(early.step_loss[k], full.step_loss[k]) << k;
  EXPECT_EQ(early.familiar, early.history.back().familiar);
}

// Each epoch records the steps taken at its end (a budget's last epoch ends
// early) and the accuracy on the familiar validation split (NaN without one),
// that of the epoch's weights; recording it changes no bit of the training.
TEST(Training, EachEpochRecordsItsStepAndTheValidationAccuracyChangingNoTrainingBit) {
  DataConfig dc;
  dc.n_per_combo = 2;
  const Dataset plain = make_dataset(dc);
  dc.n_val_per_combo = 2;
  const Dataset with_val = make_dataset(dc);
  ASSERT_TRUE(same_samples(plain.train, with_val.train));
  ASSERT_TRUE(same_samples(plain.familiar, with_val.familiar));
  ASSERT_TRUE(same_samples(plain.heldout, with_val.heldout));
  TrainConfig tc;
  tc.n_epochs = 3;
  tc.seed = 5;
  const long per_epoch = (plain.train.size() + tc.batch_size - 1) / tc.batch_size;
  tc.max_steps = 2 * per_epoch + 1;  // the third epoch takes one step
  double final_validation = NAN;
  const ModelResult a = train_and_evaluate("cnn", plain, tc);
  const ModelResult b = train_and_evaluate("cnn", with_val, tc, {}, [&](Model& m) {
    final_validation = accuracy(m, with_val.validation);
  });
  ASSERT_EQ(a.history.size(), 3u);
  ASSERT_EQ(b.history.size(), 3u);
  const long steps[] = {per_epoch, 2 * per_epoch, 2 * per_epoch + 1};
  for (size_t e = 0; e < 3; ++e) {
    SCOPED_TRACE(e);
    EXPECT_EQ(a.history[e].step, steps[e]);
    EXPECT_EQ(b.history[e].step, steps[e]);
    EXPECT_TRUE(std::isnan(a.history[e].validation));
    EXPECT_GE(b.history[e].validation, 0.0);
    EXPECT_LE(b.history[e].validation, 1.0);
    EXPECT_EQ(a.history[e].loss, b.history[e].loss);
    EXPECT_EQ(a.history[e].familiar, b.history[e].familiar);
    EXPECT_EQ(a.history[e].heldout, b.history[e].heldout);
  }
  EXPECT_EQ(b.history.back().validation, final_validation);
  EXPECT_EQ(b.validation, final_validation);
  EXPECT_TRUE(std::isnan(a.validation));
  EXPECT_EQ(a.step_loss, b.step_loss);
  EXPECT_EQ(a.familiar, b.familiar);
  EXPECT_EQ(a.heldout, b.heldout);
  EXPECT_EQ(a.circle_acc, b.circle_acc);
}

// The validation split: the familiar split's viewpoints and labels, its own
// noise, so a stopping rule never reads a test image.
TEST(Training, ValidationSplitHasFamiliarViewpointsAndItsOwnNoise) {
  DataConfig dc;
  dc.n_val_per_combo = dc.n_eval_per_combo;
  const Dataset d = make_dataset(dc);
  ASSERT_EQ(d.validation.size(), d.familiar.size());
  EXPECT_EQ(d.validation.labels, d.familiar.labels);
  EXPECT_EQ(d.validation.azimuth, d.familiar.azimuth);
  EXPECT_EQ(d.validation.elevation, d.familiar.elevation);
  EXPECT_NE(d.validation.images, d.familiar.images);
  EXPECT_EQ(make_dataset(DataConfig{}).validation.size(), 0);  // made only when asked for
}

// Every K steps the rule sees the validation accuracy; stopping keeps the steps before.
TEST(Training, StopRuleCheckedEveryKStepsOnTheValidationSplit) {
  DataConfig dc;
  dc.n_per_combo = 2;
  dc.n_val_per_combo = 2;
  const Dataset d = make_dataset(dc);
  TrainConfig tc;
  tc.n_epochs = 6;
  tc.seed = 3;
  const ModelResult full = train_and_evaluate("cnn", d, tc);
  tc.stop_every = 7;
  std::vector<long> checked;
  tc.stop = [&](const StopCheck& c) {
    checked.push_back(c.step);
    EXPECT_GE(c.validation, 0.0);
    EXPECT_LE(c.validation, 1.0);
    return c.step == 21;
  };
  const ModelResult early = train_and_evaluate("cnn", d, tc);
  EXPECT_EQ(checked, (std::vector<long>{7, 14, 21}));
  EXPECT_TRUE(early.stopped_early);
  EXPECT_EQ(early.steps, 21);
  ASSERT_EQ(early.step_loss.size(), 21u);
  for (size_t k = 0; k < 21; ++k) EXPECT_EQ(early.step_loss[k], full.step_loss[k]) << k;
  EXPECT_FALSE(std::isnan(early.validation));
}

TEST(Training, StopAtFamiliarAndMatchFamiliarSetEachModelsTarget) {
  RunOptions o = small_run();
  o.data.n_per_combo = 2;
  o.data.n_val_per_combo = 2;
  o.models = {"caps", "cnn", "linear"};
  o.stop_at_familiar = 0.6;
  const RunResult fixed = run_experiment(o);
  for (const ModelResult& m : fixed.models) {
    EXPECT_EQ(m.stop_target, 0.6) << m.name;
    // Stopped at the first check at or above the target, or ran to the cap below it.
    if (m.stopped_early) {
      EXPECT_GE(m.validation, 0.6) << m.name;
    } else {
      EXPECT_EQ(m.history.size(), size_t(o.train.n_epochs)) << m.name;
    }
  }
  o.stop_at_familiar = 0;
  o.match_familiar = "cnn";
  const RunResult matched = run_experiment(o);
  ASSERT_EQ(matched.models.size(), 3u);  // in the order asked for, though cnn trained first
  EXPECT_EQ(matched.models[0].name, "caps");
  EXPECT_EQ(matched.models[1].name, "cnn");
  const ModelResult& cnn = matched.models[1];
  EXPECT_FALSE(cnn.stopped_early);
  EXPECT_TRUE(std::isnan(cnn.stop_target));
  EXPECT_EQ(cnn.history.size(), size_t(o.train.n_epochs));
  for (const ModelResult* m : {&matched.models[0], &matched.models[2]}) {
    EXPECT_EQ(m->stop_target, cnn.validation) << m->name;
    if (m->stopped_early) {
      EXPECT_GE(m->validation, cnn.validation) << m->name;
    }
  }
  // Asking for a target without a validation split is a programming error.
  o.data.n_val_per_combo = 0;
  EXPECT_THROW(run_experiment(o), std::invalid_argument);
}

}  // namespace
}  // namespace vg
