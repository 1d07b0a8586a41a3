// The .vgck format: its bytes, each chunk's writer beside its reader, and
// the whole file's encoding and decoding (the format: docs/checkpoints.md).
// What a checkpoint does for a training (capture, restore, resume checks,
// files): checkpoint.cpp.
#include "harness/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>

namespace vg {

// The bytes are little-endian; the hosts viewgap builds for (x86-64, aarch64) are.
static_assert(std::endian::native == std::endian::little, "checkpoint_format.cpp writes the host's floats as they are");

namespace {

// PNG's trick: a high byte and a CR LF catch a file mangled as text.
constexpr uint8_t kMagic[8] = {0x89, 'V', 'G', 'M', 'F', '\r', '\n', 0x1a};
constexpr size_t kPreamble = 32;  // magic, version, flags, size, chunk count, CRC-32 of the 28 before it
constexpr size_t kChunkHeader = 12;  // tag, length (u64)
constexpr size_t kTrailer = 4;       // CRC-32 of everything before it
// This version's chunks; any other tag is carried as it is.
const char* const kKnownTags[] = {"HEAD", "WGHT", "MSTA", "ADAM", "CONF", "PROG", "LOSS", "HIST", "TRAJ", "SPRD", "CHKS"};
constexpr uint32_t kDone = 1, kStoppedEarly = 2;  // PROG's flags

uint32_t crc32_of(const uint8_t* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  while (n > 0) {  // zlib takes a uInt length
    const uInt k = uInt(std::min<size_t>(n, 1u << 30));
    c = crc32(c, p, k);
    p += k;
    n -= k;
  }
  return uint32_t(c);
}

bool known_tag(const std::string& tag) {
  for (const char* t : kKnownTags)
    if (tag == t) return true;
  return false;
}

bool printable_tag(const std::string& tag) {
  if (tag.size() != 4) return false;
  for (char c : tag)
    if (c < 0x21 || c > 0x7e) return false;
  return true;
}

// ---- writing ----
struct Out {
  std::vector<uint8_t> b;
  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f64(double v) { raw(&v, 8); }
  void str(const std::string& s) {
    if (s.size() > std::numeric_limits<uint32_t>::max()) throw std::invalid_argument("checkpoint: a string too long");
    u32(uint32_t(s.size()));
    raw(s.data(), s.size());
  }
  void floats(const std::vector<float>& v) { raw(v.data(), v.size() * sizeof(float)); }
  void chunk(const std::string& tag, const Out& payload) {
    raw(tag.data(), 4);
    u64(payload.b.size());
    raw(payload.b.data(), payload.b.size());
  }
};

// ---- reading: every length is checked against what is left before it is used ----
class In {
 public:
  In(const uint8_t* p, size_t n, std::string file, std::string where)
      : p_(p), n_(n), file_(std::move(file)), where_(std::move(where)) {}
  [[noreturn]] void bad(const std::string& what) const {
    throw CheckpointError(file_ + ": malformed " + where_ + " chunk: " + what);
  }
  void need(size_t k, const char* what) const {
    if (n_ - at_ < k) bad(std::string(what) + " runs past its end");
  }
  template <class T>
  T scalar(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  uint32_t u32(const char* what) { return scalar<uint32_t>(what); }
  uint64_t u64(const char* what) { return scalar<uint64_t>(what); }
  double f64(const char* what) { return scalar<double>(what); }
  // A count or a position: a u64 that must fit a long.
  long count(const char* what) {
    const uint64_t v = u64(what);
    if (v > uint64_t(std::numeric_limits<long>::max())) bad(std::string(what) + " out of range");
    return long(v);
  }
  std::string str(const char* what) {
    const uint32_t k = u32(what);
    need(k, what);
    std::string s(reinterpret_cast<const char*>(p_ + at_), k);
    at_ += k;
    return s;
  }
  std::vector<float> floats(uint64_t count, const char* what) {
    if (count > (n_ - at_) / sizeof(float)) bad(std::string(what) + " runs past its end");
    std::vector<float> v(static_cast<size_t>(count));
    std::memcpy(v.data(), p_ + at_, size_t(count) * sizeof(float));
    at_ += size_t(count) * sizeof(float);
    return v;
  }
  size_t left() const { return n_ - at_; }
  void end() const {
    if (left() != 0) bad(std::to_string(left()) + " bytes after its last field");
  }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
  std::string file_, where_;
};

void parse_head(In in, Checkpoint& c) {
  c.model.name = in.str("the model's name");
  c.config_hash = in.u64("the configuration's hash");
  c.model.shape.channels = int(in.u32("the image shape"));
  c.model.shape.side = int(in.u32("the image shape"));
  c.model.shape.classes = int(in.u32("the image shape"));
  for (int v : {c.model.shape.channels, c.model.shape.side, c.model.shape.classes})
    if (v < 1 || v > 65535) in.bad("an image shape of " + c.model.shape.text());
  for (uint32_t k = 0, n = in.u32("the option count"); k < n; ++k) {
    std::string name = in.str("an option's name");
    if (!c.model.options.emplace(name, in.str("an option's value")).second) in.bad("option '" + name + "' twice");
  }
  uint64_t total = 0;
  for (uint32_t k = 0, n = in.u32("the tensor count"); k < n; ++k) {
    TensorShape t;
    t.name = in.str("a tensor's name");
    t.size = in.u64("a tensor's size");
    if (t.size > std::numeric_limits<uint64_t>::max() / 8 - total) in.bad("tensor sizes that overflow");
    total += t.size;
    c.tensors.push_back(std::move(t));
  }
  in.end();
}

Out progress_chunk(const TrainingProgress& g) {
  Out o;
  o.u64(g.seed);
  o.u64(uint64_t(g.steps_per_epoch));
  o.u64(uint64_t(g.total_steps));
  o.u64(uint64_t(g.step));
  o.u32(uint32_t(g.epoch));
  o.u64(uint64_t(g.next));
  o.f64(g.loss_sum);
  o.u32((g.done ? kDone : 0) | (g.stopped_early ? kStoppedEarly : 0));
  o.f64(g.stop_target);
  o.f64(g.train_s);
  o.f64(g.eval_s);
  return o;
}

void parse_progress(In in, TrainingProgress& g) {
  g.seed = in.u64("the seed");
  g.steps_per_epoch = in.count("the steps per epoch");
  g.total_steps = in.count("the step cap");
  g.step = in.count("the step");
  const uint32_t epoch = in.u32("the epoch");
  g.next = in.count("the position in the epoch");
  g.loss_sum = in.f64("the epoch's loss");
  const uint32_t flags = in.u32("the flags");
  g.stop_target = in.f64("the stopping rule's target");
  g.train_s = in.f64("the training time");
  g.eval_s = in.f64("the evaluation time");
  in.end();
  if (flags & ~(kDone | kStoppedEarly)) in.bad("unknown flags " + std::to_string(flags));
  g.done = flags & kDone;
  g.stopped_early = flags & kStoppedEarly;
  if (epoch < 1 || epoch > uint32_t(std::numeric_limits<int>::max())) in.bad("epoch " + std::to_string(epoch));
  g.epoch = int(epoch);
  if (g.steps_per_epoch < 1 || g.total_steps < g.steps_per_epoch || g.step > g.total_steps)
    in.bad("step " + std::to_string(g.step) + " of " + std::to_string(g.total_steps) + " (" +
           std::to_string(g.steps_per_epoch) + " an epoch)");
}

Out history_chunk(const std::vector<std::vector<EpochRecord>>& history) {
  Out o;
  o.u32(uint32_t(history.size()));
  for (const std::vector<EpochRecord>& set : history) {
    o.u32(uint32_t(set.size()));
    for (const EpochRecord& e : set) {
      o.u32(uint32_t(e.epoch));
      for (double v : {e.loss, e.familiar, e.heldout, e.seconds}) o.f64(v);
      o.u32(uint32_t(e.circle.size()));
      for (double v : e.circle) o.f64(v);
    }
  }
  return o;
}

void parse_history(In in, std::vector<std::vector<EpochRecord>>& history) {
  // Each count is checked against the bytes left before anything is sized by it.
  const uint32_t sets = in.u32("the dataset count");
  if (sets > in.left() / 4) in.bad("a dataset count past its end");
  history.resize(sets);
  for (std::vector<EpochRecord>& set : history) {
    const uint32_t epochs = in.u32("an epoch count");
    if (epochs > in.left() / 40) in.bad("an epoch count past its end");
    set.resize(epochs);
    for (EpochRecord& e : set) {
      e.epoch = int(in.u32("an epoch"));
      if (e.epoch < 1) in.bad("epoch " + std::to_string(e.epoch));
      e.loss = in.f64("a loss");
      e.familiar = in.f64("an accuracy");
      e.heldout = in.f64("an accuracy");
      e.seconds = in.f64("a time");
      const uint32_t n = in.u32("a circle count");
      if (n > in.left() / 8) in.bad("a circle count past its end");
      e.circle.resize(n);
      for (double& v : e.circle) v = in.f64("a circle accuracy");
    }
  }
  in.end();
}

// TRAJ: HIST's shape again, each epoch's step and validation accuracy. A chunk
// of its own, so that files written before it (and readers from before it) still work.
Out trajectory_chunk(const std::vector<std::vector<EpochRecord>>& history) {
  Out o;
  o.u32(uint32_t(history.size()));
  for (const std::vector<EpochRecord>& set : history) {
    o.u32(uint32_t(set.size()));
    for (const EpochRecord& e : set) {
      o.u64(uint64_t(e.step));
      o.f64(e.validation);
    }
  }
  return o;
}

using Trajectory = std::vector<std::vector<std::pair<long, double>>>;  // per dataset, per epoch: step, validation

void parse_trajectory(In in, Trajectory& traj) {
  const uint32_t sets = in.u32("the dataset count");
  if (sets > in.left() / 4) in.bad("a dataset count past its end");
  traj.resize(sets);
  for (auto& set : traj) {
    const uint32_t epochs = in.u32("an epoch count");
    if (epochs > in.left() / 16) in.bad("an epoch count past its end");
    set.resize(epochs);
    for (auto& [step, validation] : set) {
      step = in.count("a step");
      validation = in.f64("an accuracy");
    }
  }
  in.end();
}

// SPRD: the epoch under way's loss at the final spread margin so far, then
// HIST's shape again with each epoch's.
Out final_margin_chunk(const TrainingProgress& g) {
  Out o;
  o.f64(g.final_margin_loss_sum);
  o.u32(uint32_t(g.history.size()));
  for (const std::vector<EpochRecord>& set : g.history) {
    o.u32(uint32_t(set.size()));
    for (const EpochRecord& e : set) o.f64(e.final_margin_loss);
  }
  return o;
}

struct FinalMargin {
  double sum = NAN;
  std::vector<std::vector<double>> history;  // per dataset, per epoch
};

void parse_final_margin(In in, FinalMargin& f) {
  f.sum = in.f64("a loss");
  const uint32_t sets = in.u32("the dataset count");
  if (sets > in.left() / 4) in.bad("a dataset count past its end");
  f.history.resize(sets);
  for (auto& set : f.history) {
    const uint32_t epochs = in.u32("an epoch count");
    if (epochs > in.left() / 8) in.bad("an epoch count past its end");
    set.resize(epochs);
    for (double& v : set) v = in.f64("a loss");
  }
  in.end();
}

// CHKS: per dataset, per check inside an epoch, its epoch (u32), step (u64),
// loss, familiar, held-out and validation accuracy, seconds and loss at the
// final spread margin (6 x f64).
Out checks_chunk(const std::vector<std::vector<EpochRecord>>& checks) {
  Out o;
  o.u32(uint32_t(checks.size()));
  for (const std::vector<EpochRecord>& set : checks) {
    o.u32(uint32_t(set.size()));
    for (const EpochRecord& e : set) {
      o.u32(uint32_t(e.epoch));
      o.u64(uint64_t(e.step));
      for (double v : {e.loss, e.familiar, e.heldout, e.validation, e.seconds, e.final_margin_loss}) o.f64(v);
    }
  }
  return o;
}

void parse_checks(In in, std::vector<std::vector<EpochRecord>>& checks) {
  const uint32_t sets = in.u32("the dataset count");
  if (sets > in.left() / 4) in.bad("a dataset count past its end");
  checks.resize(sets);
  for (std::vector<EpochRecord>& set : checks) {
    const uint32_t n = in.u32("a check count");
    if (n > in.left() / 60) in.bad("a check count past its end");
    set.resize(n);
    for (EpochRecord& e : set) {
      e.epoch = int(in.u32("an epoch"));
      if (e.epoch < 1) in.bad("epoch " + std::to_string(e.epoch));
      e.step = in.count("a step");
      e.loss = in.f64("a loss");
      e.familiar = in.f64("an accuracy");
      e.heldout = in.f64("an accuracy");
      e.validation = in.f64("an accuracy");
      e.seconds = in.f64("a time");
      e.final_margin_loss = in.f64("a loss");
    }
  }
  in.end();
}

uint64_t tensor_total(const std::vector<TensorShape>& tensors) {
  uint64_t n = 0;
  for (const TensorShape& t : tensors) n += t.size;
  return n;
}

}  // namespace

std::vector<uint8_t> encode_checkpoint(const Checkpoint& c) {
  const uint64_t n = tensor_total(c.tensors);
  if (n != c.weights.size())
    throw std::invalid_argument("encode_checkpoint: tensors of " + std::to_string(n) + " floats, " +
                                std::to_string(c.weights.size()) + " weights");
  if (c.adam && (c.adam->m.size() != n || c.adam->v.size() != n || c.adam->step < 0))
    throw std::invalid_argument("encode_checkpoint: Adam's state is not of the weights' size");
  for (const auto& [tag, payload] : c.extra)
    if (!printable_tag(tag) || known_tag(tag))
      throw std::invalid_argument("encode_checkpoint: extra chunk tag '" + tag + "'");

  std::vector<std::pair<std::string, Out>> chunks;
  Out head;
  head.str(c.model.name);
  head.u64(c.config_hash);
  head.u32(uint32_t(c.model.shape.channels));
  head.u32(uint32_t(c.model.shape.side));
  head.u32(uint32_t(c.model.shape.classes));
  head.u32(uint32_t(c.model.options.size()));
  for (const auto& [name, value] : c.model.options) {
    head.str(name);
    head.str(value);
  }
  head.u32(uint32_t(c.tensors.size()));
  for (const TensorShape& t : c.tensors) {
    head.str(t.name);
    head.u64(t.size);
  }
  chunks.emplace_back("HEAD", std::move(head));
  Out w;
  w.floats(c.weights);
  chunks.emplace_back("WGHT", std::move(w));
  if (!c.model_state.empty()) {
    Out m;
    for (uint64_t v : c.model_state) m.u64(v);
    chunks.emplace_back("MSTA", std::move(m));
  }
  if (c.adam) {
    Out a;
    a.u64(uint64_t(c.adam->step));
    a.floats(c.adam->m);
    a.floats(c.adam->v);
    chunks.emplace_back("ADAM", std::move(a));
  }
  if (!c.config.empty()) {
    Out j;
    j.raw(c.config.data(), c.config.size());
    chunks.emplace_back("CONF", std::move(j));
  }
  if (c.progress) {
    const TrainingProgress& g = *c.progress;
    if (g.step_loss.size() != size_t(g.step) || g.step > g.total_steps || g.epoch < 1 || g.steps_per_epoch < 1)
      throw std::invalid_argument("encode_checkpoint: a training progress that contradicts itself");
    chunks.emplace_back("PROG", progress_chunk(g));
    Out l;
    for (double v : g.step_loss) l.f64(v);
    chunks.emplace_back("LOSS", std::move(l));
    chunks.emplace_back("HIST", history_chunk(g.history));
    chunks.emplace_back("TRAJ", trajectory_chunk(g.history));
    if (!std::isnan(g.final_margin_loss_sum)) chunks.emplace_back("SPRD", final_margin_chunk(g));
    if (std::any_of(g.checks.begin(), g.checks.end(), [](const auto& set) { return !set.empty(); }))
      chunks.emplace_back("CHKS", checks_chunk(g.checks));
  }
  for (const auto& [tag, payload] : c.extra) {
    Out e;
    e.raw(payload.data(), payload.size());
    chunks.emplace_back(tag, std::move(e));
  }

  Out body;
  for (const auto& [tag, payload] : chunks) body.chunk(tag, payload);
  Out f;
  f.raw(kMagic, sizeof kMagic);
  f.u32(kCheckpointVersion);
  f.u32(0);  // flags: none defined
  f.u64(kPreamble + body.b.size() + kTrailer);
  f.u32(uint32_t(chunks.size()));
  f.u32(crc32_of(f.b.data(), f.b.size()));
  f.raw(body.b.data(), body.b.size());
  f.u32(crc32_of(f.b.data(), f.b.size()));
  return std::move(f.b);
}

Checkpoint decode_checkpoint(std::span<const uint8_t> bytes, const std::string& file) {
  auto fail = [&](const std::string& what) -> CheckpointError { return CheckpointError(file + ": " + what); };
  const size_t size = bytes.size();
  const uint8_t* p = bytes.data();
  auto u32_at = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, p + at, 4);
    return v;
  };
  auto hex = [](uint32_t v) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "%08x", v);
    return std::string(buf);
  };
  if (size == 0) throw fail("truncated: an empty file");
  // The preamble and the trailing CRC are laid out alike in every version, so
  // damage is told from another version before the version is read.
  if (std::memcmp(p, kMagic, std::min(size, sizeof kMagic)) != 0)
    throw fail("not a viewgap model file or checkpoint (its first bytes are not the format's magic)");
  if (size < kPreamble)
    throw fail("truncated: " + std::to_string(size) + " bytes, less than the " + std::to_string(kPreamble) +
               "-byte preamble");
  if (crc32_of(p, kPreamble - 4) != u32_at(kPreamble - 4)) throw fail("corrupted: the preamble's CRC-32 does not match");
  uint64_t declared;
  std::memcpy(&declared, p + 16, 8);
  if (size < declared)
    throw fail("truncated: " + std::to_string(size) + " of the " + std::to_string(declared) + " bytes it should hold");
  if (size > declared)
    throw fail("corrupted: " + std::to_string(size) + " bytes where its preamble says " + std::to_string(declared));
  if (size < kPreamble + kTrailer) throw fail("corrupted: a size too small to hold its checksum");
  const uint32_t stored = u32_at(size - kTrailer), computed = crc32_of(p, size - kTrailer);
  if (stored != computed)
    throw fail("corrupted: the CRC-32 of its contents is " + hex(computed) + ", the file records " + hex(stored));
  const uint32_t version = u32_at(8);
  if (version != kCheckpointVersion)
    throw fail("format version " + std::to_string(version) + "; this viewgap reads version " +
               std::to_string(kCheckpointVersion));

  // The chunks: each tag once, HEAD first, WGHT present.
  Checkpoint c;
  TrainingProgress progress;  // PROG, LOSS and HIST, which come together
  std::optional<Trajectory> trajectory;  // TRAJ, with them
  std::optional<FinalMargin> final_margin;  // SPRD, with them
  const uint32_t count = u32_at(24);
  size_t at = kPreamble;
  const size_t end = size - kTrailer;
  bool have_weights = false;
  std::vector<std::string> seen;
  for (uint32_t k = 0; k < count; ++k) {
    if (end - at < kChunkHeader) throw fail("malformed: chunk " + std::to_string(k + 1) + " runs past the end");
    const std::string tag(reinterpret_cast<const char*>(p + at), 4);
    uint64_t length;
    std::memcpy(&length, p + at + 4, 8);
    at += kChunkHeader;
    if (!printable_tag(tag)) throw fail("malformed: chunk " + std::to_string(k + 1) + " has no printable tag");
    if (length > end - at) throw fail("malformed: chunk " + tag + " runs past the end");
    if (std::find(seen.begin(), seen.end(), tag) != seen.end()) throw fail("malformed: chunk " + tag + " twice");
    if (k == 0 && tag != "HEAD") throw fail("malformed: its first chunk is " + tag + ", not HEAD");
    seen.push_back(tag);
    In in(p + at, size_t(length), file, tag);
    if (tag == "HEAD") {
      parse_head(in, c);
    } else if (tag == "WGHT") {
      if (length % sizeof(float) != 0) in.bad("a length that is no whole number of floats");
      c.weights = in.floats(length / sizeof(float), "the weights");
      have_weights = true;
    } else if (tag == "MSTA") {
      if (length % 8 != 0 || length == 0) in.bad("a length that is no whole, nonzero number of u64 values");
      while (in.left() > 0) c.model_state.push_back(in.u64("a value"));
    } else if (tag == "ADAM") {
      AdamState a;
      const uint64_t step = in.u64("the step count");
      if (step > uint64_t(std::numeric_limits<long>::max())) in.bad("a step count out of range");
      a.step = long(step);
      if (in.left() % (2 * sizeof(float)) != 0) in.bad("moments m and v of different sizes");
      const uint64_t n = in.left() / (2 * sizeof(float));
      a.m = in.floats(n, "m");
      a.v = in.floats(n, "v");
      c.adam = std::move(a);
    } else if (tag == "CONF") {
      c.config.assign(reinterpret_cast<const char*>(p + at), size_t(length));
    } else if (tag == "PROG") {
      parse_progress(in, progress);
    } else if (tag == "LOSS") {
      if (length % 8 != 0) in.bad("a length that is no whole number of f64 values");
      while (in.left() > 0) progress.step_loss.push_back(in.f64("a loss"));
    } else if (tag == "HIST") {
      parse_history(in, progress.history);
    } else if (tag == "TRAJ") {
      parse_trajectory(in, trajectory.emplace());
    } else if (tag == "SPRD") {
      parse_final_margin(in, final_margin.emplace());
    } else if (tag == "CHKS") {
      parse_checks(in, progress.checks);
    } else {
      c.extra[tag].assign(reinterpret_cast<const char*>(p + at), size_t(length));
    }
    at += size_t(length);
  }
  if (at != end) throw fail("malformed: " + std::to_string(end - at) + " bytes after its last chunk");
  if (count == 0) throw fail("malformed: no HEAD chunk");
  if (!have_weights) throw fail("malformed: no WGHT chunk (the weights)");
  const uint64_t n = tensor_total(c.tensors);
  if (n != c.weights.size())
    throw fail("malformed: its tensors hold " + std::to_string(n) + " floats, its weights " +
               std::to_string(c.weights.size()));
  if (c.adam && c.adam->m.size() != n)
    throw fail("malformed: Adam's moments hold " + std::to_string(c.adam->m.size()) + " floats, the weights " +
               std::to_string(n));
  const int parts = int(std::count(seen.begin(), seen.end(), "PROG")) +
                    int(std::count(seen.begin(), seen.end(), "LOSS")) + int(std::count(seen.begin(), seen.end(), "HIST"));
  if (parts != 0 && parts != 3) throw fail("malformed: PROG, LOSS and HIST come together; it holds " + std::to_string(parts) + " of them");
  if (trajectory && parts != 3) throw fail("malformed: a TRAJ chunk without the history (HIST) it completes");
  if (final_margin && parts != 3) throw fail("malformed: an SPRD chunk without the history (HIST) it completes");
  const bool checks = std::find(seen.begin(), seen.end(), "CHKS") != seen.end();
  if (checks && parts != 3) throw fail("malformed: a CHKS chunk without the history (HIST) it goes with");
  if (parts == 3) {
    if (progress.step_loss.size() != size_t(progress.step))
      throw fail("malformed: " + std::to_string(progress.step_loss.size()) + " step losses for step " +
                 std::to_string(progress.step));
    if (!c.adam) throw fail("malformed: a training's progress without the optimizer's state (ADAM)");
    std::vector<std::vector<EpochRecord>>& history = progress.history;
    if (trajectory) {
      bool fits = trajectory->size() == history.size();
      for (size_t k = 0; fits && k < history.size(); ++k) fits = (*trajectory)[k].size() == history[k].size();
      if (!fits) throw fail("malformed: its TRAJ chunk is not of the shape of its history (HIST)");
      for (size_t k = 0; k < history.size(); ++k)
        for (size_t e = 0; e < history[k].size(); ++e) {
          std::tie(history[k][e].step, history[k][e].validation) = (*trajectory)[k][e];
          if (history[k][e].step > progress.step)
            throw fail("malformed: epoch " + std::to_string(history[k][e].epoch) + " ends at step " +
                       std::to_string(history[k][e].step) + ", past step " + std::to_string(progress.step));
        }
    } else {
      // A file from before TRAJ: an epoch ended at its last step, or where training stopped.
      for (std::vector<EpochRecord>& set : history)
        for (EpochRecord& e : set) {
          e.validation = NAN;
          const long spe = progress.steps_per_epoch;
          e.step = e.epoch <= progress.step / spe ? long(e.epoch) * spe : progress.step;
        }
    }
    if (checks) {
      if (progress.checks.size() != history.size())
        throw fail("malformed: its CHKS chunk is of " + std::to_string(progress.checks.size()) +
                   " datasets, its history (HIST) of " + std::to_string(history.size()));
      for (const std::vector<EpochRecord>& set : progress.checks)
        for (const EpochRecord& e : set)
          if (e.step > progress.step)
            throw fail("malformed: a check at step " + std::to_string(e.step) + ", past step " +
                       std::to_string(progress.step));
    }
    if (final_margin) {
      bool fits = final_margin->history.size() == history.size();
      for (size_t k = 0; fits && k < history.size(); ++k) fits = final_margin->history[k].size() == history[k].size();
      if (!fits) throw fail("malformed: its SPRD chunk is not of the shape of its history (HIST)");
      progress.final_margin_loss_sum = final_margin->sum;
      for (size_t k = 0; k < history.size(); ++k)
        for (size_t e = 0; e < history[k].size(); ++e) history[k][e].final_margin_loss = final_margin->history[k][e];
    }
    c.progress = std::move(progress);
  }
  return c;
}

}  // namespace vg
