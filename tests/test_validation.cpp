// Input refused before any work (issue 9): geometry that cannot be right,
// numbers read by one rule, sizes that cannot fit, empty values, errors that
// name the right flag and its value. Every case: exit 2, one line naming the
// flag and the value, nothing on stdout, nothing created.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
using vg::test::lines;
using vg::test::Outcome;
using vg::test::run;

// Per-process scratch directory ("@" in a case stands for it).
std::string scratch() {
  static const std::string d = [] {
    const std::string p = vg::test::temp_dir() + "viewgap_validation." + std::to_string(getpid());
    fs::remove_all(p);
    fs::create_directories(p);
    return p;
  }();
  return d;
}

std::string expand(std::string s) {
  for (size_t at; (at = s.find('@')) != std::string::npos;) s.replace(at, 1, scratch());
  return s;
}

struct BadInput {
  const char* name;     // the test's name
  const char* args;     // after `viewgap`; a sweep writes to @/sweep
  const char* mention;  // the flag and its value as the error must show them
};

// One class of the issue per block.
const BadInput kBad[] = {
    // Geometry: one judgement for run and sweep.
    {"RunReversedTrainingRange", "run --train-azimuths 150:0", "--train-azimuths '150:0': B < A"},
    {"SweepReversedTrainingRange", "sweep --train-azimuths 150:0", "--train-azimuths '150:0': B < A"},
    {"RunZeroWidthTrainingRange", "run --train-azimuths 0:0", "--train-azimuths '0:0': 6 views of 0:0"},
    {"SweepZeroWidthTrainingRange", "sweep --train-azimuths 0:0", "--train-azimuths '0:0': 6 views of 0:0"},
    {"RunWholeCircleTrainingRange", "run --train-azimuths 0:360 --test-azimuths 200:200 --n-test-views 1",
     "--train-azimuths '0:360': spans 360"},
    {"SweepWholeCircleTrainingRange", "sweep --train-azimuths 0:360", "--train-azimuths '0:360': spans 360"},
    {"RunZeroWidthHeldOutRange", "run --test-azimuths 200:200", "--test-azimuths '200:200': 6 views"},
    {"SweepZeroTestWidth", "sweep --test-width 0", "--test-width '0': 6 views"},
    {"RunHeldOutInsideTrainingRange", "run --test-azimuths 100:130 --n-test-views 2",
     "--test-azimuths '100:130': held-out azimuth 100 lies inside the training range"},
    {"SweepWindowWrappingIntoTrainingRange", "sweep --gaps 0,250", "--gaps '0,250': gap 250"},
    {"RunElevationBelowRange", "run --elevations -100:50", "--elevations '-100:50': elevations lie in [-90, 90]"},
    {"SweepElevationAboveRange", "sweep --elevations 10:95", "--elevations '10:95': elevations lie in [-90, 90]"},
    {"RunOneElevationOfARange", "run --elevations 10:50 --n-elev 1", "--n-elev '1': 1 elevation of 10:50"},
    {"SweepOneElevationOfARange", "sweep --elevations 10:50 --n-elev 1", "--n-elev '1': 1 elevation of 10:50"},
    {"RunOneViewOfARange", "run --n-test-views 1", "--n-test-views '1': 1 view of 200:330"},
    {"RunBatchLargerThanTrainingSet", "run --batch-size 451", "--batch-size '451': larger than the training set (450"},
    {"SweepBatchLargerThanTrainingSet", "sweep --batch-size 451 --train-azimuths 0:150",
     "--batch-size '451': larger than the training set"},
    {"SweepGridBatchLargerThanTrainingSet", "sweep --grid n-per-combo=1,5 --batch-size 100",
     "--batch-size '100': larger than the training set (90"},
    // Numbers: one parser, one rule (decimal, nothing around it).
    {"GridValueTwice", "sweep --grid n-epochs=1,1", "--grid 'n-epochs=1,1': '1' and '1' are the same"},
    {"GridValueTwiceSpelledDifferently", "sweep --grid lr=2e-3,0.002", "--grid 'lr=2e-3,0.002': '2e-3' and '0.002'"},
    {"GridValueWithNewline", "sweep --grid \"$(printf 'n-epochs=\\n1')\"", "--n-epochs '\\n1': expected a whole number"},
    {"GridValueWithSpace", "sweep --grid 'lr=2e-3, 1e-3'", "--lr ' 1e-3': expected a decimal number"},
    {"LeadingSpaceInWholeNumber", "run --n-epochs ' 1'", "--n-epochs ' 1': expected a whole number"},
    {"TrailingSpaceInWholeNumber", "run --n-epochs '1 '", "--n-epochs '1 ': expected a whole number"},
    {"LeadingSpaceInRealNumber", "run --lr ' 2e-3'", "--lr ' 2e-3': expected a decimal number"},
    {"SpaceInRange", "run --train-azimuths '0: 150'", "--train-azimuths '0: 150': expected A:B"},
    {"HexRealNumber", "run --lr 0x1p-9", "--lr '0x1p-9': expected a decimal number"},
    {"HexInRange", "run --train-azimuths 0x0:150", "--train-azimuths '0x0:150'"},
    {"InfinityIsNotANumber", "run --em-lambda inf", "--em-lambda 'inf': expected a decimal number"},
    {"LearningRateUnderflowsInFloat", "run --lr 1e-50", "--lr '1e-50': too small for single precision"},
    {"EmEpsUnderflowsInFloat", "run --em-eps 1e-45", "--em-eps '1e-45': too small for single precision"},
    {"RealBeyondDouble", "run --em-eps 1e-400", "--em-eps '1e-400': out of range"},
    {"SpaceInGap", "sweep --gaps '0, 30'", "--gaps ' 30': expected a decimal number"},
    {"SameGapSpelledDifferently", "sweep --gaps 30,30.0", "--gaps '30,30.0': gap 30 listed twice"},
    {"HexJobs", "sweep --jobs 0x2", "--jobs '0x2': expected a whole number"},
    {"NoiseAboveHalf", "run --noise 0.6", "--noise '0.6': must be >= 0 and <= 0.5"},
    {"NoiseOnSmallNorb", "run --data norb:/nonexistent --noise 0.1", "--noise '0.1': applies to --data synthetic only"},
    // Sizes: one bound for a CNN's width, and memory checked up front.
    {"CnnModelWiderThanCnnHiddenAllows", "run --models caps,cnn99999", "--models 'caps,cnn99999': model 'cnn99999'"},
    {"ProfileCnnModelTooWide", "profile --model cnn99999 --out @/p.csv", "--model 'cnn99999'"},
    {"CnnHiddenTooWide", "run --cnn-hidden 65537", "--cnn-hidden '65537': must be between 1 and 65536"},
    {"DropoutOfOne", "run --models cnn-paper --dropout 1", "--dropout '1': must be below 1"},
    {"DropoutNegative", "run --models cnn-paper --dropout -0.5", "--dropout '-0.5'"},
    {"DropoutNotANumber", "run --models cnn-paper --dropout half", "--dropout 'half'"},
    {"DropoutWithoutAModelThatReadsIt", "run --models cnn --dropout 0.3", "--dropout '0.3': no model in --models"},
    {"MoreCellsAtOnceThanMemoryHolds", "sweep --models cnn65536 --seeds 0:1023 --jobs 1024",
     "--jobs '1024': 1024 trainings at once need"},
    // 32 models of ~6.6 GB, each alone within a machine's memory, side by side at --threads 32.
    {"MoreModelsSideBySideThanMemoryHolds",
     "run --threads 32 --models "
     "cnn65536,cnn65535,cnn65534,cnn65533,cnn65532,cnn65531,cnn65530,cnn65529,"
     "cnn65528,cnn65527,cnn65526,cnn65525,cnn65524,cnn65523,cnn65522,cnn65521,"
     "cnn65520,cnn65519,cnn65518,cnn65517,cnn65516,cnn65515,cnn65514,cnn65513,"
     "cnn65512,cnn65511,cnn65510,cnn65509,cnn65508,cnn65507,cnn65506,cnn65505",
     "--threads '32': models training side by side"},
    // Empty values are values, and wrong; one file named twice.
    {"EmptyOutJson", "run --out-json ''", "--out-json '': empty value"},
    {"EmptyDump", "run --dump ''", "--dump '': empty value"},
    {"EmptyTrace", "profile --out @/p.csv --trace ''", "--trace '': empty value"},
    {"EmptyProfileOut", "profile --out ''", "--out '': empty value"},
    {"EmptyJobs", "sweep --jobs ''", "--jobs '': empty value"},
    {"EmptySweepOut", "sweep --out '' --seeds 0", "--out '': empty value"},
    {"EmptyEqualsValue", "run --seed=", "--seed '': no value given"},
    {"ProfileOutAndTraceTheSameFile", "profile --out @/p.csv --trace @/p.csv", "--trace '@/p.csv': is the same file as --out"},
    {"ProfileOutAndTraceTheSameFileSpelledDifferently", "profile --out @/p.csv --trace @/./p.csv",
     "--trace '@/./p.csv': is the same file as --out"},
    {"OutJsonInsideTheDump", "run --out-json @/d/run.json --dump @/d", "--dump '@/d': is the same file as --out-json"},
    // The right flag, with its value.
    {"DatasetTooLargeBlamesTheFlagThatGrewIt", "run --n-elev 360 --n-train-views 360 --test-azimuths 200:200 --n-test-views 1",
     "--n-elev '360': the dataset"},
    {"TestWidthTooWideBlamesTestWidth", "sweep --test-width 300 --gaps 0", "--test-width '300'"},
    {"RepeatedFlagNamesBothValues", "run --seed 1 --seed 2", "--seed given 2 times ('1', '2')"},
    {"RepeatedSweepFlag", "sweep --jobs 1 --jobs=2", "--jobs given 2 times ('1', '2')"},
};

// ctest lists a case by its arguments, not its bytes.
void PrintTo(const BadInput& c, std::ostream* os) { *os << c.args; }

class BadFlag : public testing::TestWithParam<BadInput> {};

TEST_P(BadFlag, IsOneLineExitTwoNamingFlagAndValueBeforeAnyWork) {
  const BadInput& c = GetParam();
  std::string args = expand(c.args);
  if (args.rfind("sweep", 0) == 0 && args.find("--out") == std::string::npos) args += " --out " + scratch() + "/sweep";
  const Outcome o = run(args);
  EXPECT_EQ(o.code, 2) << args << "\n" << o.err;
  EXPECT_EQ(lines(o.err), 1) << args << "\n" << o.err;
  EXPECT_NE(o.err.find(expand(c.mention)), std::string::npos) << args << "\n" << o.err;
  EXPECT_EQ(o.out, "") << args;
  // Nothing written: no sweep directory, no output file.
  EXPECT_FALSE(fs::exists(scratch() + "/sweep")) << args;
  EXPECT_FALSE(fs::exists(scratch() + "/p.csv")) << args;
  EXPECT_FALSE(fs::exists(scratch() + "/d/run.json")) << args;
}

INSTANTIATE_TEST_SUITE_P(Validation, BadFlag, testing::ValuesIn(kBad),
                         [](const testing::TestParamInfo<BadInput>& p) { return std::string(p.param.name); });

// The same rules accept what makes sense (each a one-epoch run).
TEST(Validation, SoundGeometriesAreAccepted) {
  const std::string quick = " --n-epochs 1 --n-per-combo 1 --models cnn --quiet";
  for (const std::string& args : {
           std::string("run --train-azimuths 300:420 --test-azimuths 100:250 --batch-size 10"),  // wraps past 0
           std::string("run --train-azimuths 30:30 --n-train-views 1 --test-azimuths 200:200 --n-test-views 1 "
                       "--elevations 30:30 --n-elev 1 --batch-size 5"),  // single views
           std::string("run --elevations -90:90 --n-elev 2 --batch-size 10"),
           "sweep --seeds 0 --gaps 0 --test-width 60 --batch-size 10 --out " + scratch() + "/ok_sweep",  // touches at gap 0
       }) {
    const Outcome o = run(args + quick);
    EXPECT_EQ(o.code, 0) << args << "\n" << o.err;
  }
}

TEST(Validation, ResumeWithAnotherConfigurationNamesTheFirstDifferingFlagAndBothValues) {
  const std::string dir = scratch() + "/resume_config";
  const std::string base = "sweep --seeds 0 --gaps 0 --n-epochs 1 --n-per-combo 1 --batch-size 10 --models cnn --quiet --out " + dir;
  ASSERT_EQ(run(base + " --lr 1e-3").code, 0);
  Outcome o = run(base + " --lr 2e-3 --resume");
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(lines(o.err), 1) << o.err;
  EXPECT_NE(o.err.find("holds a different sweep: --lr is '1e-3' there, '2e-3' here"), std::string::npos) << o.err;
  o = run(base + " --lr 1e-3 --grid n-eval-per-combo=1,2 --resume");
  EXPECT_NE(o.err.find("--grid is '[]' there, '[[\"n-eval-per-combo\",[\"1\",\"2\"]]]' here"), std::string::npos) << o.err;
}

TEST(Validation, MoreJobsThanCoresPrintNoWarning) {
  const Outcome o = run("sweep --seeds 0 --gaps 0 --n-epochs 1 --n-per-combo 1 --batch-size 10 --models cnn --quiet "
                        "--jobs 64 --out " + scratch() + "/jobs64");
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(o.err, "");
}

}  // namespace
