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

int64_t number(const std::string& whole, const std::string& f) {
  if (f.empty()) bad(whole, "empty field");
  if (f.size() > 9) bad(whole, "field '" + f + "' too large");
  for (char c : f)
    if (!std::isdigit(static_cast<unsigned char>(c))) bad(whole, "'" + f + "' is not a number");
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

int64_t parse_time_limit(const std::string& s) {
  std::string u = s;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return std::toupper(c); });
  if (u == "UNLIMITED" || u == "INFINITE" || u == "-1") return kUnlimited;
  if (s.empty()) bad(s, "empty");
  int64_t days = 0;
  std::string rest = s;
  auto dash = s.find('-');
  bool has_days = dash != std::string::npos;
  if (has_days) {
    days = number(s, s.substr(0, dash));
    rest = s.substr(dash + 1);
  }
  auto f = split(rest, ':');
  if (f.size() > 3) bad(s, "too many ':' fields");
  std::vector<int64_t> v;
  for (auto& x : f) v.push_back(number(s, x));
  int64_t h = 0, m = 0, sec = 0;
  if (has_days) {  // D-HH, D-HH:MM, D-HH:MM:SS
    h = v[0];
    if (v.size() > 1) m = v[1];
    if (v.size() > 2) sec = v[2];
    if (h > 23) bad(s, "hours must be 0-23 after a day count");
    if (m > 59 || sec > 59) bad(s, "minutes and seconds must be 0-59");
  } else if (v.size() == 1) {  // MM
    m = v[0];
  } else if (v.size() == 2) {  // MM:SS
    m = v[0];
    sec = v[1];
    if (sec > 59) bad(s, "seconds must be 0-59");
  } else {  // HH:MM:SS
    h = v[0];
    m = v[1];
    sec = v[2];
    if (m > 59 || sec > 59) bad(s, "minutes and seconds must be 0-59");
  }
  return ((days * 24 + h) * 60 + m) * 60 + sec;
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
