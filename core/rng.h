// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11).
// Every draw is a pure function of (seed, purpose, index...), so data and
// initialisation never depend on thread count or generation order.
#pragma once
#include <cmath>
#include <cstdint>
#include <numbers>

namespace vg {

// What a stream of random numbers is for; part of the key, so streams of
// different purposes never overlap even with equal indices.
enum class Purpose : uint32_t { Noise = 1, Shuffle = 2, Init = 3, Test = 4, Dropout = 5, Plane = 6, Toys = 7, Check = 8 };

struct Philox4x32 {
  static constexpr int kRounds = 10;
  static constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // the round multipliers
  // The key of each round: the 64-bit key, then Weyl steps of its two halves.
  static void round_keys(uint64_t key64, uint32_t k0[kRounds], uint32_t k1[kRounds]) {
    uint32_t a = uint32_t(key64), b = uint32_t(key64 >> 32);
    for (int r = 0; r < kRounds; ++r, a += 0x9E3779B9u, b += 0xBB67AE85u) {
      k0[r] = a;
      k1[r] = b;
    }
  }
  static void round(uint32_t ctr[4], uint32_t k0, uint32_t k1) {
    const uint64_t p0 = uint64_t(kM0) * ctr[0], p1 = uint64_t(kM1) * ctr[2];
    const uint32_t c0 = uint32_t(p1 >> 32) ^ ctr[1] ^ k0;
    const uint32_t c2 = uint32_t(p0 >> 32) ^ ctr[3] ^ k1;
    ctr[0] = c0; ctr[1] = uint32_t(p1); ctr[2] = c2; ctr[3] = uint32_t(p0);
  }
  // 10 rounds of Philox on a 128-bit counter with a 64-bit key.
  static void block(uint32_t out[4], uint64_t key64, uint64_t c_hi, uint64_t c_lo) {
    uint32_t k0[kRounds], k1[kRounds];
    round_keys(key64, k0, k1);
    out[0] = uint32_t(c_lo); out[1] = uint32_t(c_lo >> 32);
    out[2] = uint32_t(c_hi); out[3] = uint32_t(c_hi >> 32);
    for (int r = 0; r < kRounds; ++r) round(out, k0[r], k1[r]);
  }
};

// SplitMix64 finaliser: folds several indices into one well-mixed 64-bit word.
constexpr uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A stream keyed by (seed, purpose, a, b); draws are numbered 0,1,2,... within
// it. Cheap to construct: make one per image, per epoch, per tensor.
class Stream {
 public:
  Stream(uint64_t seed, Purpose purpose, uint64_t a = 0, uint64_t b = 0)
      : key_(mix64(seed ^ mix64(uint64_t(purpose)))), sub_(mix64(a) ^ mix64(mix64(b) + 1)) {}

  uint32_t next_u32() {
    if (pos_ == 4) { Philox4x32::block(buf_, key_, sub_, ctr_++); pos_ = 0; }
    return buf_[pos_++];
  }
  // Uniform in (0, 1): never exactly 0, so log() is safe.
  double uniform() {
    const uint64_t hi = next_u32(), lo = next_u32();
    return (double((hi << 21) ^ (lo >> 11)) + 0.5) * 0x1.0p-53;
  }
  // Standard normal (Box-Muller; the second value of each pair is kept).
  double normal() {
    if (has_spare_) { has_spare_ = false; return spare_; }
    const double r = std::sqrt(-2.0 * std::log(uniform()));
    const double t = 2.0 * std::numbers::pi * uniform();
    spare_ = r * std::sin(t); has_spare_ = true;
    return r * std::cos(t);
  }
  // Hands the stream's next `blocks` whole Philox blocks (four words each) to a
  // bulk kernel that draws them itself (kernels/elementwise.h: fill_normal),
  // and returns the first one's counter; words left in a part-used block are
  // skipped.
  uint64_t take_blocks(uint64_t blocks) {
    const uint64_t first = ctr_;
    ctr_ += blocks;
    pos_ = 4;
    return first;
  }
  uint64_t key() const { return key_; }
  uint64_t sub() const { return sub_; }
  // Uniform integer in [0, n) by rejection (no modulo bias).
  uint32_t below(uint32_t n) {
    const uint32_t lim = uint32_t(-n) % n;
    for (;;) {
      const uint64_t m = uint64_t(next_u32()) * n;
      if (uint32_t(m) >= lim) return uint32_t(m >> 32);
    }
  }

 private:
  uint64_t key_, sub_, ctr_ = 0;
  uint32_t buf_[4] = {};
  int pos_ = 4;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

}  // namespace vg
