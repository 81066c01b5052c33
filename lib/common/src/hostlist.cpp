#include "dynres/hostlist.hpp"

#include <cctype>
#include <algorithm>
#include <map>
#include <stdexcept>

namespace dynres {
namespace {

// Split on commas that are not inside brackets.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') {
      if (--depth < 0) throw std::invalid_argument("node list '" + s + "': unbalanced ']'");
    }
    if (c == ',' && depth == 0) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (depth != 0) throw std::invalid_argument("node list '" + s + "': unbalanced '['");
  out.push_back(cur);
  return out;
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string pad(long v, size_t width) {
  std::string n = std::to_string(v);
  if (n.size() < width) n.insert(0, width - n.size(), '0');
  return n;
}

void expand_one(const std::string& item, const std::string& whole, std::vector<std::string>& out) {
  if (item.empty()) throw std::invalid_argument("node list '" + whole + "': empty element");
  auto lb = item.find('[');
  if (lb == std::string::npos) {
    out.push_back(item);
    return;
  }
  auto rb = item.find(']', lb);
  if (rb == std::string::npos) throw std::invalid_argument("node list '" + whole + "': unbalanced '['");
  std::string prefix = item.substr(0, lb);
  std::string body = item.substr(lb + 1, rb - lb - 1);
  std::string suffix = item.substr(rb + 1);
  if (body.empty()) throw std::invalid_argument("node list '" + whole + "': empty brackets");
  std::vector<std::string> tails;
  expand_one(suffix.empty() ? std::string("\x01") : suffix, whole, tails);  // suffix may hold more brackets
  size_t start = 0;
  while (start <= body.size()) {
    auto comma = body.find(',', start);
    std::string part = body.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    auto dash = part.find('-');
    std::string lo = part.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : part.substr(dash + 1);
    if (!all_digits(lo) || !all_digits(hi))
      throw std::invalid_argument("node list '" + whole + "': bad range '" + part + "'");
    long a = std::stol(lo), b = std::stol(hi);
    if (b < a) throw std::invalid_argument("node list '" + whole + "': range '" + part + "' runs backwards");
    if (b - a > 1000000) throw std::invalid_argument("node list '" + whole + "': range '" + part + "' too large");
    size_t width = lo.size();
    for (long v = a; v <= b; ++v)
      for (auto& t : tails) out.push_back(prefix + pad(v, width) + (t == "\x01" ? "" : t));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
}

}  // namespace

std::vector<std::string> expand_hostlist(const std::string& expr) {
  std::vector<std::string> out;
  std::string s;
  for (char c : expr)
    if (!std::isspace(static_cast<unsigned char>(c))) s += c;
  if (s.empty()) return out;
  for (auto& item : split_top(s)) expand_one(item, expr, out);
  return out;
}

std::string compress_hostlist(const std::vector<std::string>& hosts) {
  // Group by (prefix, digit width); keep first-appearance order of groups.
  struct Group {
    std::string prefix;
    size_t width;
    std::vector<long> nums;
  };
  std::vector<Group> groups;
  std::vector<std::string> plain_in_order;  // placeholder ordering key
  std::vector<std::pair<int, std::string>> order;  // (group index or -1, plain name)
  std::map<std::pair<std::string, size_t>, size_t> index;
  for (const auto& h : hosts) {
    size_t i = h.size();
    while (i > 0 && std::isdigit(static_cast<unsigned char>(h[i - 1]))) --i;
    if (i == h.size() || h.size() - i > 9) {
      order.push_back({-1, h});
      continue;
    }
    std::string prefix = h.substr(0, i), digits = h.substr(i);
    // a zero-padded number keeps its width; an unpadded one groups with width 0
    size_t width = (digits.size() > 1 && digits[0] == '0') ? digits.size() : 0;
    auto key = std::make_pair(prefix, width);
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      groups.push_back({prefix, width, {}});
      order.push_back({static_cast<int>(it->second), ""});
    }
    groups[it->second].nums.push_back(std::stol(digits));
  }
  std::string out;
  for (auto& [gi, name] : order) {
    if (!out.empty()) out += ',';
    if (gi < 0) {
      out += name;
      continue;
    }
    Group& g = groups[gi];
    std::vector<long> v = g.nums;
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    if (v.size() == 1) {
      out += g.prefix + pad(v[0], g.width);
      continue;
    }
    out += g.prefix + "[";
    for (size_t i = 0; i < v.size();) {
      size_t j = i;
      while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
      if (i) out += ',';
      out += pad(v[i], g.width);
      if (j > i) out += "-" + pad(v[j], g.width);
      i = j + 1;
    }
    out += "]";
  }
  return out;
}

}  // namespace dynres
