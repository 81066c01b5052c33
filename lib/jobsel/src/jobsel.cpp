#include "dynres/jobsel.hpp"

#include <pwd.h>
#include <signal.h>
#include <string.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <sstream>

namespace dynres {
namespace {

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; std::getline(ss, w, ',');) {
    auto b = w.find_first_not_of(" \t"), e = w.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(w.substr(b, e - b + 1));
  }
  return out;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

const std::vector<std::pair<std::string, std::string>>& state_codes() {
  static const std::vector<std::pair<std::string, std::string>> c = {
      {kPending, "PD"}, {kRunning, "R"},  {kCompleted, "CD"}, {kFailed, "F"},
      {kCancelled, "CA"}, {kTimeout, "TO"}, {kNodeFail, "NF"}};
  return c;
}

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 18 &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

}  // namespace

std::vector<std::string> parse_state_list(const std::string& list) {
  std::vector<std::string> out;
  auto add = [&](const std::string& s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  auto items = split(list);
  if (items.empty()) throw std::invalid_argument("empty state list");
  for (auto& w : items) {
    std::string u = upper(w);
    if (u == "ALL") {
      for (auto& [l, c] : state_codes()) add(l);
      continue;
    }
    if (u == "CANCELED") u = kCancelled;
    bool found = false;
    for (auto& [l, c] : state_codes())
      if (u == l || u == c) add(l), found = true;
    if (!found)
      throw std::invalid_argument("invalid job state '" + w +
                                  "' (PENDING|PD, RUNNING|R, COMPLETED|CD, FAILED|F, CANCELLED|CA, TIMEOUT|TO, "
                                  "NODE_FAIL|NF, all)");
  }
  return out;
}

std::string compact_state(const std::string& state) {
  for (auto& [l, c] : state_codes())
    if (l == state) return c;
  return state;
}

std::vector<int64_t> parse_id_list(const std::string& list) {
  std::vector<int64_t> out;
  auto items = split(list);
  if (items.empty()) throw std::invalid_argument("empty job id list");
  for (auto& w : items) {
    if (!all_digits(w) || std::stoll(w) < 1) throw std::invalid_argument("invalid job id '" + w + "'");
    out.push_back(std::stoll(w));
  }
  return out;
}

std::vector<int64_t> resolve_job_refs(State& st, const std::string& list) {
  // split on commas outside brackets
  std::vector<std::string> items;
  std::string cur;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      items.push_back(cur), cur.clear();
      continue;
    }
    cur += c;
  }
  items.push_back(cur);
  std::vector<int64_t> out;
  for (auto& w : items) {
    if (w.empty()) throw std::invalid_argument("empty job id in '" + list + "'");
    auto us = w.find('_');
    std::string head = w.substr(0, us);
    if (!all_digits(head) || std::stoll(head) < 1) throw std::invalid_argument("invalid job id '" + w + "'");
    int64_t id = std::stoll(head);
    if (us == std::string::npos) {
      auto tasks = st.array_task_ids(id);
      if (tasks.empty()) out.push_back(id);
      else out.insert(out.end(), tasks.begin(), tasks.end());
      continue;
    }
    std::string t = w.substr(us + 1);
    std::vector<int> idx;
    const bool range = t.size() > 2 && t.front() == '[' && t.back() == ']';
    if (range) {
      std::stringstream ss(t.substr(1, t.size() - 2));
      for (std::string r; std::getline(ss, r, ',');) {
        auto dash = r.find('-');
        std::string a = r.substr(0, dash), b = dash == std::string::npos ? a : r.substr(dash + 1);
        if (!all_digits(a) || !all_digits(b) || a.size() > 7 || b.size() > 7 || std::stoi(b) < std::stoi(a) ||
            std::stoi(b) - std::stoi(a) > 100000)
          throw std::invalid_argument("invalid array task range '" + r + "' in '" + w + "'");
        for (int k = std::stoi(a); k <= std::stoi(b); ++k) idx.push_back(k);
      }
    } else {
      if (!all_digits(t) || t.size() > 7) throw std::invalid_argument("invalid array task '" + w + "'");
      idx.push_back(std::stoi(t));
    }
    size_t found = 0;
    for (int k : idx) {
      auto ids = st.array_task_ids(id, k);
      if (ids.empty() && !range) throw std::invalid_argument("invalid job id " + head + "_" + std::to_string(k));
      if (!ids.empty()) out.push_back(ids[0]), ++found;
    }
    if (range && found == 0) throw std::invalid_argument("invalid job id " + w + " (no such array task)");
  }
  return out;
}

int64_t parse_user(const std::string& user) {
  if (user.empty()) throw std::invalid_argument("empty user name");
  struct passwd pw, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &res) == 0 && res) return res->pw_uid;
  if (all_digits(user)) return std::stoll(user);
  throw std::invalid_argument("invalid user '" + user + "'");
}

std::vector<int64_t> parse_user_list(const std::string& list) {
  std::vector<int64_t> out;
  auto items = split(list);
  if (items.empty()) throw std::invalid_argument("empty user list");
  for (auto& w : items) out.push_back(parse_user(w));
  return out;
}

std::string user_name(int64_t uid) {
  struct passwd pw, *res = nullptr;
  std::vector<char> buf(16384);
  if (::getpwuid_r(static_cast<uid_t>(uid), &pw, buf.data(), buf.size(), &res) == 0 && res) return res->pw_name;
  return std::to_string(uid);
}

int parse_signal(const std::string& sig) {
  if (all_digits(sig)) {
    int n = static_cast<int>(std::stoll(sig));
    if (n >= 1 && n < NSIG) return n;
    throw std::invalid_argument("invalid signal '" + sig + "'");
  }
  std::string u = upper(sig);
  if (u.rfind("SIG", 0) == 0) u = u.substr(3);
  for (int s = 1; s < NSIG; ++s) {
    const char* abbrev = ::sigabbrev_np(s);
    if (abbrev && u == abbrev) return s;
  }
  throw std::invalid_argument("invalid signal '" + sig + "' (e.g. TERM, KILL, INT, HUP, USR1, USR2, CONT, STOP)");
}

bool JobFilter::matches(const JobRecord& j) const {
  return (ids.empty() || ids.count(j.id)) && (uids.empty() || uids.count(j.uid)) &&
         (states.empty() || states.count(j.state)) && (names.empty() || names.count(j.name));
}

std::vector<JobRecord> select_jobs(State& st, const JobFilter& f, bool all_states) {
  std::vector<std::string> states(f.states.begin(), f.states.end());
  if (states.empty() && f.ids.empty() && !all_states) states = {kPending, kRunning};
  std::vector<JobRecord> out;
  for (auto& j : st.jobs(states))
    if (f.matches(j)) out.push_back(std::move(j));
  return out;
}

}  // namespace dynres
