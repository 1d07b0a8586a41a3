// A registered protocol chosen as a user would choose it, for the tests that
// run every protocol or every source (tests/test_protocol.cpp, test_source.cpp).
#pragma once
#include <string>

#include "data/protocol.h"
#include "harness/run_flags.h"
#include "tests/test_util.h"

namespace vg::test {

// The run flags that choose `p`: its source (a fixture where it reads files),
// its --split or the flags its default rule reads.
inline RunFlags flags_choosing(const Protocol& p) {
  RunFlags f;
  const std::string source = p.source;
  f.data = fixture_data(source);
  if (p.split != nullptr) f.split = p.split;
  for (const auto& [flag, value] : p.chosen_by) *run_flag(f, flag) = value;
  // The toys at their smallest (810 records a split, as the files' fixture).
  if (source == "toys") *run_flag(f, "toy-instances") = "1", *run_flag(f, "toy-lightings") = "1";
  return f;
}

// Whether the tests that make or run every protocol's data make p's: not a
// protocol whose code another runs on the fixture (Fashion-MNIST's 70,000
// images through the same make as idx:DIR's, tested there on a few hundred).
inline bool made_in_tests(const Protocol& p) {
  if (fixture_data(p.source) != p.source || std::string(p.source) == "synthetic" || std::string(p.source) == "toys")
    return true;
  for (const Protocol& q : protocol_registry())
    if (q.make == p.make && &q != &p && fixture_data(q.source) != q.source) return false;
  return true;
}

// Its configuration, through the command line's validation, at seed 7.
inline DataConfig configured(const Protocol& p) {
  int threads = 1;
  DataConfig d = validate_run(flags_choosing(p), &threads).data;
  d.seed = 7;
  return d;
}

}  // namespace vg::test
