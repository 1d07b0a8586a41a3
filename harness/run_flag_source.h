// What the files of the run flags share among themselves (run_flags.cpp,
// validate_run.cpp, memory_budget.cpp): the flags as a protocol reads them,
// and a protocol's preset applied. Not for callers outside harness/.
#pragma once
#include <string>
#include <utility>

#include "data/protocol.h"
#include "harness/run_flags.h"

namespace vg {

// The run flags as a protocol reads them (data/protocol.h), against the
// command's defaults; --dump too, which a data source may not support.
class RunFlagSource final : public FlagSource {
 public:
  RunFlagSource(const RunFlags& f, const RunFlags& defaults) : f_(f), defaults_(defaults) {}
  std::string value(const std::string& name) const override;
  // Typed counts as set: a flag typed at its default is ignored no less.
  bool changed(const std::string& name) const override;
  long long integer(const std::string& name, long long lo, long long hi) const override;
  double real(const std::string& name, double lo, double hi) const override;
  AngleRange range(const std::string& name, const std::string& count_name, const std::string* count) const override;
  std::pair<double, double> interval(const std::string& name, double lo, double hi) const override;

 private:
  static std::string text(const RunFlags& f, const std::string& name);
  const RunFlags &f_, &defaults_;
};

// The flags with the protocol's preset (--split) applied; a flag the preset
// sets that the user also set (changed from the command's `defaults`) is a conflict.
RunFlags with_preset(const Protocol& p, const RunFlags& given, const RunFlags& defaults);

}  // namespace vg
