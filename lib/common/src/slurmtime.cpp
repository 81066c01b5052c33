#include "dynres/slurmtime.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace dynres {
namespace {

[[noreturn]] void bad(const std::string& s, const std::string& why) {
  throw std::invalid_argument("invalid time limit '" + s + "': " + why +
                              " (use MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)");
}

// A field of digits; more than 12 digits is beyond any bound the callers
// accept, so it is reported as too large rather than overflowing.
int64_t number(const std::string& whole, const std::string& f) {
  if (f.empty()) return 0;  // Slurm: "1-" is one day, missing fields are 0
  for (char c : f)
    if (!std::isdigit(static_cast<unsigned char>(c))) bad(whole, "'" + f + "' is not a number");
  if (f.size() > 12) throw std::out_of_range("time limit '" + whole + "' is too long");
  return std::stoll(f);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    auto p = s.find(sep, start);
    out.push_back(s.substr(start, p == std::string::npos ? std::string::npos : p - start));
    if (p == std::string::npos) return out;
    start = p + 1;
  }
}

}  // namespace

// Slurm's time_str2secs (src/common/parse_time.c): the forms are checked as
// _is_valid_timespec does, fields are not range-checked (00-24:00 is a day,
// 10:61 is 10 min 61 s), "D-" is D days.
int64_t parse_time_limit(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "UNLIMITED" || u == "INFINITE" || u == "-1") return kUnlimited;
  if (s.empty()) bad(s, "empty");
  int digits = 0, dashes = 0, colons = 0;
  bool in_digit = false;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (!in_digit) ++digits;
      in_digit = true;
    } else if (c == '-') {
      in_digit = false;
      ++dashes;
      if (colons) bad(s, "'-' after ':'");
    } else if (c == ':') {
      in_digit = false;
      ++colons;
    } else {
      bad(s, std::string("'") + c + "' is not allowed");
    }
  }
  if (!digits) bad(s, "no number");
  if (dashes > 1 || colons > 2) bad(s, "too many '-' or ':' fields");
  if (dashes ? (colons == 1 && digits < 3) || (colons == 2 && digits < 4)
             : (colons == 1 && digits < 2) || (colons == 2 && digits < 3))
    bad(s, "empty field");
  int64_t days = 0;
  std::string rest = s;
  auto dash = s.find('-');
  if (dash != std::string::npos) {
    if (dash == 0) bad(s, "no day count before '-'");
    days = number(s, s.substr(0, dash));
    rest = s.substr(dash + 1);
  }
  auto f = split(rest, ':');
  std::vector<int64_t> v;
  for (auto& x : f) v.push_back(number(s, x));
  int64_t h = 0, m = 0, sec = 0;
  if (dash != std::string::npos) {  // D-[HH[:MM[:SS]]]
    h = v[0];
    if (v.size() > 1) m = v[1];
    if (v.size() > 2) sec = v[2];
  } else if (v.size() == 1) {  // MM
    m = v[0];
  } else if (v.size() == 2) {  // MM:SS
    m = v[0];
    sec = v[1];
  } else {  // HH:MM:SS
    h = v[0];
    m = v[1];
    sec = v[2];
  }
  return ((days * 24 + h) * 60 + m) * 60 + sec;  // fields of <= 12 digits: no overflow
}

std::string format_duration(int64_t t) {
  if (t < 0) return "UNLIMITED";
  char buf[64];
  int64_t d = t / 86400, h = (t / 3600) % 24, m = (t / 60) % 60, s = t % 60;
  if (d > 0)
    std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", (long long)d, (long long)h, (long long)m, (long long)s);
  else if (h > 0)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
  else
    std::snprintf(buf, sizeof buf, "%lld:%02lld", (long long)m, (long long)s);
  return buf;
}

}  // namespace dynres
