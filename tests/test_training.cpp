// Short training runs: both models learn well above chance, results are
// reproducible, and NaN stops a run with a message naming where.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "harness/train.h"

namespace vg {
namespace {

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

TEST(Training, ThreadCountChangesOnlyRounding) {
  // oneDNN splits reductions by thread count, so results agree to rounding,
  // not bit for bit (sweep cells run single-threaded for bitwise equality).
  RunOptions o = small_run();
  o.train.n_epochs = 1;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const RunResult a = run_experiment(o);
  omp_set_num_threads(2);
  const RunResult b = run_experiment(o);
  omp_set_num_threads(saved);
  EXPECT_EQ(a.data.train.images, b.data.train.images);  // the data is bitwise equal
  for (size_t k = 0; k < a.models.size(); ++k)
    EXPECT_NEAR(a.models[k].history[0].loss, b.models[k].history[0].loss,
                1e-4 * a.models[k].history[0].loss) << a.models[k].name;
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

TEST(Training, ModelNames) {
  EXPECT_TRUE(is_model_name("caps"));
  EXPECT_TRUE(is_model_name("cnn"));
  EXPECT_TRUE(is_model_name("cnn136"));
  EXPECT_FALSE(is_model_name("cnn0"));
  EXPECT_FALSE(is_model_name("cnnx"));
  EXPECT_FALSE(is_model_name("rnn"));
  TrainConfig tc;
  tc.cnn_hidden = 136;
  EXPECT_EQ(make_model("cnn", tc, 2)->params().count(), 558293u);
  EXPECT_EQ(make_model("cnn64", tc, 2)->params().count(), 262949u);
}

}  // namespace
}  // namespace vg
