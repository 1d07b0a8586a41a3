// The one rule for numbers viewgap reads, from a flag, a model option, a grid
// value, a range A:B or its own CSV files: plain decimal, nothing around it.
// (In models/ because model options are read by the models; the harness's
// flags use the same functions.)
//   whole:  -?[0-9]+
//   real:   -?([0-9]+(.[0-9]*)?|.[0-9]+)([eE][+-]?[0-9]+)?
// No whitespace, no '+', no hex, no inf/nan: " 5", "5\n", "0x10", "1e3" (as a whole
// number) are all refused, the same way everywhere.
#pragma once
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

namespace vg {

namespace numbers_detail {
inline bool digits(std::string_view s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
  return i > start;
}
}  // namespace numbers_detail

enum class NumberStatus { ok, syntax, range };

template <typename T>
struct ParsedNumber {
  NumberStatus status = NumberStatus::syntax;
  T value{};
  explicit operator bool() const { return status == NumberStatus::ok; }
};

// A whole number; range: of the right form but beyond long long.
inline ParsedNumber<long long> parse_whole(std::string_view s) {
  size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
  if (!numbers_detail::digits(s, i) || i != s.size()) return {};
  ParsedNumber<long long> p;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), p.value);
  p.status = r.ec == std::errc() && r.ptr == s.data() + s.size() ? NumberStatus::ok : NumberStatus::range;
  return p;
}

// A finite real number; range: of the right form but overflowing double, or
// nonzero and below its smallest value (it would read as 0).
inline ParsedNumber<double> parse_real_number(std::string_view s) {
  size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
  const bool int_part = numbers_detail::digits(s, i);
  bool frac_part = false;
  if (i < s.size() && s[i] == '.') {
    ++i;
    frac_part = numbers_detail::digits(s, i);
  }
  if (!int_part && !frac_part) return {};
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!numbers_detail::digits(s, i)) return {};
  }
  if (i != s.size()) return {};
  ParsedNumber<double> p;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), p.value);
  p.status = r.ec == std::errc() && r.ptr == s.data() + s.size() ? NumberStatus::ok : NumberStatus::range;
  return p;
}

// A whole number in [lo, hi] into *out: "" if so, else why not (the text of an
// error line that names the flag and the value).
inline std::string whole_in(std::string_view v, long long lo, long long hi, long long* out) {
  const ParsedNumber<long long> x = parse_whole(v);
  if (x.status == NumberStatus::syntax) return "expected a whole number (digits, no spaces)";
  if (!x || x.value < lo || x.value > hi)
    return "must be between " + std::to_string(lo) + " and " + std::to_string(hi);
  *out = x.value;
  return "";
}

// A real number in [lo, hi] (lo excluded if lo_open) into *out; `single`: it is
// stored as a float, so it must stay nonzero there. "" if so, else why not.
inline std::string real_in(std::string_view v, double lo, double hi, bool lo_open, bool single, double* out) {
  const ParsedNumber<double> x = parse_real_number(v);
  if (x.status == NumberStatus::syntax) return "expected a decimal number (e.g. 0.002 or 2e-3; no spaces, no hex)";
  if (x.status == NumberStatus::range) return "out of range of a double";
  if (x.value < lo || (lo_open && x.value == lo) || x.value > hi) {
    std::ostringstream o;
    o << "must be " << (lo_open ? "> " : ">= ") << lo << " and <= " << hi;
    return o.str();
  }
  if (single && x.value != 0 && std::fabs(x.value) < std::numeric_limits<float>::min()) {
    std::ostringstream o;
    o << "too small for single precision (it would be stored as " << float(x.value) << "; the smallest is "
      << std::numeric_limits<float>::min() << ")";
    return o.str();
  }
  *out = x.value;
  return "";
}

}  // namespace vg
