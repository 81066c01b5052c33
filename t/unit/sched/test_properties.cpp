// Property-style checks of decide() on seeded random snapshots.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "dynres/sched.hpp"

using namespace dynres::sched;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr Policy kPolicies[] = {Policy::fcfs, Policy::backfill, Policy::easy};

Snapshot random_snapshot(uint64_t seed) {
  std::mt19937_64 g(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); };
  auto chance = [&](int pct) { return uni(1, 100) <= pct; };
  auto constraint = [&] { return chance(50) ? Constraint::none : static_cast<Constraint>(uni(0, 5)); };

  Snapshot s;
  s.now = 10000;
  const int n = uni(4, 64);
  for (int i = 0; i < n; ++i) s.nodes.push_back({"n" + std::to_string(i), !chance(8), 0});

  // Running jobs hold disjoint node sets (a few include nodes that went down).
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), g);
  int64_t id = 1;
  for (size_t p = 0; p < idx.size() && chance(85);) {
    int k = uni(1, std::min<int>(16, static_cast<int>(idx.size() - p)));
    RunningJob r;
    r.id = id++;
    r.nodes.assign(idx.begin() + p, idx.begin() + p + k);
    std::sort(r.nodes.begin(), r.nodes.end());
    p += k;
    for (int x : r.nodes) s.nodes[x].job = r.id;
    r.min_nodes = r.max_nodes = k;
    r.start_time = s.now - uni(0, 5000);
    r.time_limit = chance(15) ? -1 : uni(60, 7200);  // some are overdue
    s.running.push_back(std::move(r));
  }
  for (int w = uni(0, 30); w > 0; --w) {
    WaitingJob j;
    j.id = 1000 + id++;
    j.kind = static_cast<JobKind>(uni(0, 2));
    j.constraint = constraint();
    if (j.kind == JobKind::rigid) {
      j.req_nodes = j.min_nodes = j.max_nodes = uni(1, n / 2 + 2);
      if (chance(70)) j.req_nodes = j.min_nodes = j.max_nodes = std::max(1, largest_admissible(j.constraint, 1, j.req_nodes));
    } else {
      j.min_nodes = j.req_nodes = uni(1, n / 2);
      j.max_nodes = j.min_nodes + uni(0, n);
    }
    if (chance(3)) j.req_nodes = j.min_nodes = j.max_nodes = n + 1;  // never fits
    j.time_limit = chance(10) ? -1 : uni(10, 8000);
    j.submit_time = s.now - w;
    s.waiting.push_back(j);
  }
  return s;
}

struct Rel {
  double t;
  int n;
};

/// Earliest time `need` nodes are free when `free` are free now and `rel`
/// come back; +inf if never.
double earliest(int need, int free, std::vector<Rel> rel, double now) {
  std::sort(rel.begin(), rel.end(), [](const Rel& a, const Rel& b) { return a.t < b.t; });
  if (free >= need) return now;
  for (const auto& r : rel)
    if ((free += r.n) >= need) return r.t;
  return kInf;
}

bool same(const Decision& a, const Decision& b) {
  if (a.starts.size() != b.starts.size() || a.holds != b.holds) return false;
  for (size_t i = 0; i < a.starts.size(); ++i)
    if (a.starts[i].job != b.starts[i].job || a.starts[i].nodes != b.starts[i].nodes) return false;
  return a.expands.empty() && b.expands.empty() && a.shrinks.empty() && b.shrinks.empty();
}

}  // namespace

TEST_CASE("random snapshots: invariants of every policy") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const Snapshot s = random_snapshot(seed);
    int up = 0, free0 = 0;
    for (const auto& n : s.nodes) up += n.up, free0 += n.up && n.job == 0;
    std::map<int64_t, size_t> pos;
    for (size_t i = 0; i < s.waiting.size(); ++i) pos[s.waiting[i].id] = i;

    for (Policy p : kPolicies) {
      INFO("seed " << seed << " policy " << to_string(p));
      PolicyConfig cfg;
      cfg.policy = p;
      const Decision d = decide(s, cfg);
      REQUIRE(same(d, decide(s, cfg)));  // purity

      std::set<int> used;
      std::map<int64_t, int> size;
      size_t last = 0;
      int free = free0;
      for (const auto& st : d.starts) {
        REQUIRE(pos.count(st.job));  // starts are waiting jobs, once, in queue order
        REQUIRE(!size.count(st.job));
        REQUIRE((size.empty() || pos[st.job] > last));
        last = pos[st.job];
        REQUIRE(std::is_sorted(st.nodes.begin(), st.nodes.end()));
        for (int x : st.nodes) {
          REQUIRE((x >= 0 && x < static_cast<int>(s.nodes.size())));
          REQUIRE(s.nodes[x].up);
          REQUIRE(s.nodes[x].job == 0);
          REQUIRE(used.insert(x).second);
        }
        const WaitingJob& j = s.waiting[last];
        const int k = static_cast<int>(st.nodes.size());
        REQUIRE(admissible(j.constraint, k));
        if (j.kind == JobKind::rigid) REQUIRE(k == j.req_nodes);
        else REQUIRE((k >= j.min_nodes && k <= j.max_nodes));
        // moldable extension: as many nodes as fit (easy may use fewer to
        // stay within the reservation's extra nodes)
        if (p == Policy::easy) REQUIRE(k <= start_size(j, free));
        else REQUIRE(k == start_size(j, free));
        size[st.job] = k;
        free -= k;
      }

      // every waiting job is started or held, exactly once
      std::map<int64_t, std::string> held;
      for (const auto& [id, why] : d.holds) {
        REQUIRE(pos.count(id));
        REQUIRE(held.emplace(id, why).second);
      }
      for (const auto& j : s.waiting) REQUIRE(size.count(j.id) + held.count(j.id) == 1);
      for (const auto& j : s.waiting)
        if (min_size(j) == 0 || min_size(j) > up) REQUIRE(held[j.id] == "Resources");

      // fcfs: no start after the first job that could fit some day but not now
      if (p == Policy::fcfs) {
        bool blocked = false;
        for (const auto& j : s.waiting) {
          if (min_size(j) == 0 || min_size(j) > up) continue;
          if (blocked) REQUIRE(held[j.id] == "Priority");
          else if (held.count(j.id)) blocked = true;
        }
      }
      // backfill: every held job does not fit in what is left at its turn
      if (p == Policy::backfill) {
        int left = free0;
        for (const auto& j : s.waiting) {
          if (size.count(j.id)) left -= size[j.id];
          else REQUIRE(start_size(j, left) == 0);
        }
      }
    }
  }
}

TEST_CASE("random snapshots: EASY backfilling never delays the head") {
  int heads = 0, backfilled = 0;
  for (uint64_t seed = 1; seed <= 400; ++seed) {
    const Snapshot s = random_snapshot(1000 + seed);
    PolicyConfig cfg;
    cfg.policy = Policy::easy;
    const Decision d = decide(s, cfg);
    INFO("seed " << 1000 + seed);

    int up = 0, free0 = 0;
    for (const auto& n : s.nodes) up += n.up, free0 += n.up && n.job == 0;
    auto limit = [&](double l) { return l >= 0 ? l : cfg.default_time_limit; };
    std::vector<Rel> running;
    for (const auto& r : s.running) {
      int k = 0;
      for (int x : r.nodes) k += s.nodes[x].up;
      running.push_back({std::max(s.now, r.start_time + limit(r.time_limit)), k});
    }
    std::map<int64_t, int> size;
    for (const auto& st : d.starts) size[st.job] = static_cast<int>(st.nodes.size());
    std::map<int64_t, std::string> held(d.holds.begin(), d.holds.end());

    // Without backfilling: running jobs plus the starts ahead of the head.
    std::vector<Rel> before = running;
    int free_before = free0;
    const WaitingJob* head = nullptr;
    double without = kInf;
    for (const auto& j : s.waiting) {
      if (size.count(j.id)) {
        before.push_back({s.now + limit(j.time_limit), size[j.id]});
        free_before -= size[j.id];
        continue;
      }
      if (min_size(j) == 0 || min_size(j) > up) continue;
      without = earliest(min_size(j), free_before, before, s.now);
      if (without < kInf) { head = &j; break; }
      REQUIRE(held[j.id] == "Resources");
    }
    if (!head) continue;
    ++heads;
    REQUIRE(held[head->id] == "Resources");

    // With the backfilled starts too (an unlimited one never gives back).
    std::vector<Rel> after = before;
    int free_after = free_before;
    bool behind = false;
    for (const auto& j : s.waiting) {
      if (&j == head) { behind = true; continue; }
      if (!behind) continue;
      if (size.count(j.id)) {
        ++backfilled;
        after.push_back({j.time_limit >= 0 ? s.now + j.time_limit : kInf, size[j.id]});
        free_after -= size[j.id];
      } else if (min_size(j) > 0 && min_size(j) <= up) {
        REQUIRE(held[j.id] == "Priority");
      }
    }
    CHECK(earliest(min_size(*head), free_after, after, s.now) <= without);
  }
  CHECK(heads > 100);       // the property was exercised ...
  CHECK(backfilled > 100);  // ... with real backfilling behind the head
}

TEST_CASE("decide is pure and reads nothing but its arguments") {
  const Snapshot s = random_snapshot(77);
  const Snapshot copy = s;
  for (Policy p : kPolicies) {
    PolicyConfig cfg;
    cfg.policy = p;
    auto a = decide(s, cfg);
    auto b = decide(copy, cfg);
    CHECK(same(a, b));
  }
}
