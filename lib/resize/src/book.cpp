// The resize protocol's state machine (resize.hpp).
#include <algorithm>

#include "dynres/resize.hpp"

namespace dynres::resize {

namespace {
/// Compare secrets without an early exit on the first difference.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned char d = a.size() != b.size();
  for (size_t i = 0; i < std::max(a.size(), b.size()); ++i)
    d |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return d == 0 && !a.empty();
}
bool holds(const std::vector<std::string>& sorted, const std::string& n) {
  return std::binary_search(sorted.begin(), sorted.end(), n);
}
}  // namespace

const char* to_string(Phase p) {
  switch (p) {
    case Phase::rigid: return "rigid";
    case Phase::accepting: return "accepting";
    case Phase::adapting: return "adapting";
    case Phase::closed: return "closed";
  }
  return "closed";
}

void Book::admit(int64_t job, uint32_t uid, std::string secret, std::vector<std::string> nodes) {
  Job j;
  j.uid = uid;
  j.secret = std::move(secret);
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  j.nodes = std::move(nodes);
  jobs_[job] = std::move(j);
}

void Book::forget(int64_t job) { jobs_.erase(job); }

Result Book::authenticate(const Peer& p) const {
  auto it = jobs_.find(p.job);
  if (it == jobs_.end()) return Result::no("job " + std::to_string(p.job) + " is not running");
  if (it->second.uid != p.uid)
    return Result::no("uid " + std::to_string(p.uid) + " may not speak for job " + std::to_string(p.job));
  if (!same_secret(it->second.secret, p.secret)) return Result::no("wrong secret for job " + std::to_string(p.job));
  return Result::yes();
}

Result Book::check(const Peer& p, Job** out) {
  if (auto r = authenticate(p); !r.ok) return r;
  auto it = jobs_.find(p.job);
  *out = &it->second;
  return Result::yes();
}

Result Book::register_job(const Peer& p) {
  Job* j = nullptr;
  if (auto r = check(p, &j); !r.ok) return r;
  if (j->phase == Phase::closed)
    return Result::no("job " + std::to_string(p.job) + " deregistered; it cannot register again");
  if (j->phase == Phase::rigid) j->phase = Phase::accepting;
  return Result::yes();
}

Result Book::deregister(const Peer& p, double now, std::vector<Order>* rolled_back) {
  Job* j = nullptr;
  if (auto r = check(p, &j); !r.ok) return r;
  if (j->pending) {
    if (rolled_back) rolled_back->push_back(*j->pending);
    j->pending.reset();
    j->backoff_until = now + opt_.backoff;
  }
  j->phase = Phase::closed;
  return Result::yes();
}

std::optional<Order> Book::order(int64_t job, Kind kind, std::vector<std::string> nodes, int count, double now,
                                 std::string* why) {
  auto refuse = [&](const std::string& w) -> std::optional<Order> {
    if (why) *why = w;
    return std::nullopt;
  };
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return refuse("job " + std::to_string(job) + " is not running");
  Job& j = it->second;
  if (j.phase != Phase::accepting) return refuse(std::string("job is ") + to_string(j.phase));
  if (now < j.backoff_until) return refuse("job is in back-off after a rolled-back order");
  std::sort(nodes.begin(), nodes.end());
  if (std::adjacent_find(nodes.begin(), nodes.end()) != nodes.end()) return refuse("a node is named twice");
  if (kind == Kind::expand) {
    if (nodes.empty() || count != 0) return refuse("an expand names the nodes added, and only them");
    for (auto& n : nodes)
      if (holds(j.nodes, n)) return refuse("the job already holds " + n);
  } else {
    if (nodes.empty() == (count <= 0)) return refuse("a shrink names either the nodes or a count");
    size_t k = nodes.empty() ? static_cast<size_t>(count) : nodes.size();
    if (k >= j.nodes.size()) return refuse("a shrink must leave the job at least one node");
    for (auto& n : nodes)
      if (!holds(j.nodes, n)) return refuse("the job does not hold " + n);
  }
  Order o;
  o.id = next_id_++;
  o.job = job;
  o.kind = kind;
  o.nodes = std::move(nodes);
  o.count = kind == Kind::shrink ? count : 0;
  o.sent = now;
  o.deadline = now + opt_.timeout;
  j.pending = o;
  j.phase = Phase::adapting;
  return o;
}

Result Book::commit(const Peer& p, uint64_t order_id, std::vector<std::string> released, double now, Commit* out) {
  Job* j = nullptr;
  if (auto r = check(p, &j); !r.ok) return r;
  if (!j->pending || j->pending->id != order_id)
    return Result::no("order " + std::to_string(order_id) + " is not outstanding for job " + std::to_string(p.job));
  Order o = *j->pending;
  if (now > o.deadline)  // expire() rolls it back and reports it, in one place
    return Result::no("order " + std::to_string(order_id) + " timed out; it is rolled back");
  std::sort(released.begin(), released.end());
  if (std::adjacent_find(released.begin(), released.end()) != released.end())
    return Result::no("a released node is named twice");
  if (o.kind == Kind::shrink && o.count > 0) {
    if (released.size() != static_cast<size_t>(o.count))
      return Result::no("the shrink asked for " + std::to_string(o.count) + " nodes, " +
                        std::to_string(released.size()) + " were released");
    for (auto& n : released)
      if (!holds(j->nodes, n)) return Result::no("the job does not hold " + n);
  } else if (!released.empty() && released != o.nodes) {
    return Result::no("the released nodes differ from the order's");
  }
  std::vector<std::string> gone = o.kind == Kind::shrink ? (o.count > 0 ? released : o.nodes) : std::vector<std::string>{};
  if (o.kind == Kind::expand) {
    j->nodes.insert(j->nodes.end(), o.nodes.begin(), o.nodes.end());
    std::sort(j->nodes.begin(), j->nodes.end());
  } else {
    std::erase_if(j->nodes, [&](const std::string& n) { return std::binary_search(gone.begin(), gone.end(), n); });
  }
  j->pending.reset();
  j->phase = Phase::accepting;
  if (out) *out = {o, gone, now - o.sent};
  return Result::yes();
}

Result Book::begin(const Peer& p, uint64_t order_id, bool restart, double now, Order* out) {
  Job* j = nullptr;
  if (auto r = check(p, &j); !r.ok) return r;
  if (!j->pending || j->pending->id != order_id)
    return Result::no("order " + std::to_string(order_id) + " is not outstanding for job " + std::to_string(p.job));
  if (now > j->pending->deadline) return Result::no("order " + std::to_string(order_id) + " timed out; it is rolled back");
  if (restart) j->pending->deadline = std::max(j->pending->deadline, now + opt_.restart_timeout);
  if (out) *out = *j->pending;
  return Result::yes();
}

std::optional<Order> Book::rollback(int64_t job, double now) {
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.pending) return std::nullopt;
  Order o = *it->second.pending;
  it->second.pending.reset();
  it->second.phase = Phase::accepting;
  it->second.backoff_until = now + opt_.backoff;
  return o;
}

void Book::clear_backoff(int64_t job) {
  if (auto it = jobs_.find(job); it != jobs_.end()) it->second.backoff_until = -1;
}

void Book::adopt(int64_t job, const Order& o) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  Job& j = it->second;
  if (o.kind == Kind::expand) {
    for (auto& n : o.nodes)
      if (!holds(j.nodes, n)) j.nodes.push_back(n);
    std::sort(j.nodes.begin(), j.nodes.end());
  } else {
    std::erase_if(j.nodes, [&](const std::string& n) { return std::find(o.nodes.begin(), o.nodes.end(), n) != o.nodes.end(); });
  }
  j.pending.reset();
  if (j.phase == Phase::adapting) j.phase = Phase::accepting;
}

void Book::restore(int64_t job, Phase p) {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return;
  it->second.pending.reset();
  it->second.phase = p == Phase::adapting ? Phase::accepting : p;
}

std::vector<Order> Book::expire(double now) {
  std::vector<Order> out;
  for (auto& [id, j] : jobs_) {
    if (!j.pending || now <= j.pending->deadline) continue;
    out.push_back(*j.pending);
    j.pending.reset();
    j.phase = Phase::accepting;
    j.backoff_until = now + opt_.backoff;
  }
  return out;
}

bool Book::any_adapting() const {
  for (auto& [id, j] : jobs_)
    if (j.pending) return true;
  return false;
}

bool Book::can_order(int64_t job, double now) const {
  auto it = jobs_.find(job);
  return it != jobs_.end() && it->second.phase == Phase::accepting && now >= it->second.backoff_until;
}

Phase Book::phase(int64_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? Phase::closed : it->second.phase;
}

std::vector<std::string> Book::nodes(int64_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? std::vector<std::string>{} : it->second.nodes;
}

std::optional<Order> Book::outstanding(int64_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return std::nullopt;
  return it->second.pending;
}

}  // namespace dynres::resize
