#pragma once
// provenance.csv's fields as this binary writes them, for the sweep tests.
#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace vg::test {

// provenance.csv's fields after cell and seed (commit, dirty, compiler, cpu,
// isa, host) as this binary writes them: its build and machine, which the
// sweep's meta.json names in its own words ("git_commit" with "-dirty").
inline std::vector<std::string> own_provenance(const std::string& dir) {
  const auto m = nlohmann::json::parse(slurp(dir + "/meta.json"))["meta"];
  std::string commit = m["git_commit"];
  const bool dirty = commit.ends_with("-dirty");
  if (dirty) commit.resize(commit.size() - 6);
  std::string cpu = m["cpu"];
  std::replace(cpu.begin(), cpu.end(), ',', ';');
  return {commit, commit == "unknown" ? "unknown" : dirty ? "yes" : "no", m["compiler"], cpu, m["isa"], m["host"]};
}

}  // namespace vg::test
