// Every registered data source (data/source.h): its entry is whole, the
// protocols that split it name it, each configuration has exactly one source,
// and the data each of its protocols makes comes in the shape and with the
// classes the source declares; a flag only other sources read is refused.
// (tests/test_protocol.cpp runs every protocol, so every source, through the
// determinism tests.) A new source is tested by registering.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "data/protocol.h"
#include "harness/run_flags.h"
#include "tests/protocol_util.h"
#include "tests/test_util.h"

namespace vg {
namespace {

using test::configured;
using test::flags_choosing;

// Each source's first registered protocol: the one its data is made through here.
const Protocol& first_protocol(const Source& s) {
  for (const Protocol& p : protocol_registry())
    if (p.source == std::string(s.name)) return p;
  throw std::logic_error(std::string("no protocol splits ") + s.name);
}

TEST(Source, EntriesAreWholeAndEachIsSplitByARegisteredProtocol) {
  std::set<std::string> names;
  for (const Source& s : source_registry()) {
    SCOPED_TRACE(s.name);
    EXPECT_TRUE(names.insert(s.name).second);
    EXPECT_NE(s.help, nullptr);
    EXPECT_NE(s.holds, nullptr);
    EXPECT_NE(s.shape, nullptr);
    EXPECT_NE(s.class_name, nullptr);
    EXPECT_NE(s.data_text, nullptr);
    EXPECT_NO_THROW(first_protocol(s));
    // --data as the messages write it names this source and no other.
    const std::string typed = s.takes_dir() ? std::string(s.name) + "/some/dir" : s.form();
    for (const Source& t : source_registry()) EXPECT_EQ(t.reads(typed), &t == &s) << typed << " read by " << t.name;
    // A source that takes a directory reads its flag; the record drops the colon.
    if (s.takes_dir()) {
      EXPECT_NE(std::find(s.flags.begin(), s.flags.end(), std::string("data")), s.flags.end());
      EXPECT_EQ(s.record() + ":", s.name);
    } else {
      EXPECT_EQ(s.record(), s.name);
    }
  }
  for (const Protocol& p : protocol_registry()) EXPECT_NO_THROW(source_named(p.source)) << p.name;
  // --data's default is the first source.
  EXPECT_EQ(RunFlags{}.data, source_registry().front().name);
}

TEST(Source, EveryConfigurationIsHeldByExactlyOneSourceAndOneOfItsProtocols) {
  for (const Protocol& p : protocol_registry()) {
    SCOPED_TRACE(p.name);
    const DataConfig cfg = configured(p);
    int holders = 0;
    for (const Source& s : source_registry()) holders += s.holds(cfg) ? 1 : 0;
    EXPECT_EQ(holders, 1);
    EXPECT_STREQ(source_of(cfg).name, p.source);
    EXPECT_TRUE(source_of(cfg).reads(source_of(cfg).data_text(cfg)));
    // Among its source's protocols, one answers for it (a preset by its views).
    int answering = 0;
    for (const Protocol& q : protocol_registry())
      answering += q.source == std::string(p.source) && q.holds != nullptr && q.holds(q, cfg) ? 1 : 0;
    EXPECT_EQ(answering, 1);
    EXPECT_STREQ(protocol_of(cfg).name, p.name);
  }
}

TEST(Source, DataComesInTheDeclaredShapeWithTheDeclaredClasses) {
  for (const Source& s : source_registry()) {
    SCOPED_TRACE(s.name);
    const Protocol& p = first_protocol(s);
    DataConfig cfg = configured(p);
    cfg.n_val_per_combo = 1;  // the validation split too, where the protocol makes one
    const ImageShape shape = s.shape(cfg);
    EXPECT_EQ(image_shape(cfg), shape);
    const Dataset d = p.make(cfg);
    for (const Split* split : {&d.train, &d.familiar, &d.heldout, &d.circle, &d.validation, &d.axis_sweep}) {
      if (split->size() == 0) continue;
      EXPECT_EQ(split->shape(), shape);
      EXPECT_EQ(split->images.size(), size_t(split->size()) * shape.pixels());
      for (int label : split->labels) ASSERT_TRUE(label >= 0 && label < shape.classes) << label;
      // A sample's viewpoint is recorded where the source has them.
      if (s.viewpoints) {
        EXPECT_EQ(split->azimuth.size(), size_t(split->size()));
      }
    }
    // Every class is trained on, and each has a name of its own.
    std::set<int> trained(d.train.labels.begin(), d.train.labels.end());
    EXPECT_EQ(int(trained.size()), shape.classes);
    const std::vector<std::string> names = class_names(cfg);
    ASSERT_EQ(int(names.size()), shape.classes);
    EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
    for (const std::string& n : names) EXPECT_FALSE(n.empty());
    // A source without viewpoints is split only by protocols that hold out none.
    if (!s.viewpoints)
      for (const Protocol& q : protocol_registry())
        if (q.source == std::string(s.name)) {
          EXPECT_STRNE(q.axis.name, "azimuth") << q.name;
          EXPECT_STRNE(q.axis.name, "elevation") << q.name;
        }
  }
}

TEST(Source, AFlagOnlyOtherSourcesReadIsRefusedNamingThem) {
  for (const Source& owner : source_registry())
    for (const char* flag : owner.flags) {
      if (flag == std::string("data")) continue;
      const auto spec = std::find_if(protocol_flags().begin(), protocol_flags().end(),
                                     [&](const DataFlag& d) { return d.name == std::string(flag); });
      ASSERT_NE(spec, protocol_flags().end()) << flag;
      for (const Source& other : source_registry()) {
        if (std::find(other.flags.begin(), other.flags.end(), std::string(flag)) != other.flags.end()) continue;
        SCOPED_TRACE(std::string("--") + flag + " with --data " + other.form());
        RunFlags f = flags_choosing(first_protocol(other));
        f.protocol[flag] = spec->default_value;
        f.typed.insert(flag);
        try {
          select_run_protocol(f, RunFlags{});
          ADD_FAILURE() << "accepted";
        } catch (const std::exception& e) {
          EXPECT_NE(std::string(e.what()).find(std::string("--") + flag), std::string::npos) << e.what();
          EXPECT_NE(std::string(e.what()).find(owner.form()), std::string::npos) << e.what();
        }
      }
    }
}

}  // namespace
}  // namespace vg
