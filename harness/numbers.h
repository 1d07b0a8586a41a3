// The one rule for numbers viewgap reads, from a flag, a grid value, a range
// A:B or its own CSV files: plain decimal, nothing around it.
//   whole:  -?[0-9]+
//   real:   -?([0-9]+(.[0-9]*)?|.[0-9]+)([eE][+-]?[0-9]+)?
// No whitespace, no '+', no hex, no inf/nan: " 5", "5\n", "0x10", "1e3" (as a whole
// number) are all refused, the same way everywhere.
#pragma once
#include <cctype>
#include <charconv>
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

}  // namespace vg
