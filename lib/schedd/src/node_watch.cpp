#include "node_watch.hpp"

#include <poll.h>
#include <unistd.h>

#include <cctype>

#include "dynres/hostlist.hpp"

namespace dynres::schedd {

namespace {
const char* kNotResponding = "Not responding";
constexpr size_t kMaxAgents = 100000;  // more connections than nodes is a misbehaving peer
}  // namespace

NodeWatch::NodeWatch(double timeout, double started, Log log) : timeout_(timeout), started_(started), log_(std::move(log)) {}

NodeWatch::~NodeWatch() {
  for (auto& [fd, c] : conns_) ::close(fd);
}

void NodeWatch::adopt(State& st, int fd, const proto::json& hello, uid_t uid, pid_t pid, double heartbeat, double now) {
  auto refuse = [&](const std::string& why) {
    try {
      proto::send_frame(fd, {{"error", why}});
    } catch (const std::exception&) {
    }
    ::close(fd);
  };
  if (uid != 0 && uid != ::getuid()) return refuse("node_hello: Access/permission denied (only the cluster's owner or root)");
  if (!hello.contains("node") || !hello["node"].is_string()) return refuse("node_hello needs a node name");
  const std::string node = hello["node"].get<std::string>();
  if (node.empty() || node.size() > 255) return refuse("node_hello: invalid node name");
  bool known = false;
  for (auto& n : st.nodes()) known = known || n.name == node;
  if (!known) return refuse("node_hello: no node named '" + node + "'");
  if (conns_.size() >= kMaxAgents) return refuse("node_hello: too many agents");
  for (auto it = conns_.begin(); it != conns_.end(); ++it)
    if (it->second.node == node) {  // a new agent replaces the old one (restarted)
      ::close(it->first);
      conns_.erase(it);
      break;
    }
  try {
    proto::send_frame(fd, {{"ok", true}, {"heartbeat", heartbeat}});
  } catch (const std::exception&) {
    ::close(fd);
    return;
  }
  Conn c;
  c.fd = fd;
  c.node = node;
  c.pid = pid;
  conns_.emplace(fd, std::move(c));
  last_[node] = now;
  lost_.erase(node);
}

std::vector<int> NodeWatch::fds() const {
  std::vector<int> out;
  for (auto& [fd, c] : conns_) out.push_back(fd);
  return out;
}

void NodeWatch::drop(int fd, double /*now*/, const std::string& why) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return;
  lost_[it->second.node] = why;
  ::close(fd);
  conns_.erase(it);
}

bool NodeWatch::on_readable(int fd, double now) {
  auto it = conns_.find(fd);
  if (it == conns_.end()) return false;
  if (!it->second.in.fill(fd)) {
    drop(fd, now, "agent connection closed");
    return true;
  }
  for (int n = 0; n < 64; ++n) {
    std::optional<proto::json> m;
    try {
      m = it->second.in.next();
    } catch (const std::exception& e) {
      drop(fd, now, std::string("agent protocol error: ") + e.what());
      return true;
    }
    if (!m) break;
    if (!m->is_object() || m->value("op", std::string()) != "heartbeat") {
      drop(fd, now, "agent sent something other than a heartbeat");
      return true;
    }
    if (m->contains("outer")) {  // inside Slurm: the outer Slurm's state of this node says it is lost
      const auto& o = (*m)["outer"];
      std::string st = o.is_string() && o.get<std::string>().size() <= 32 ? o.get<std::string>() : "?";
      for (char& ch : st)
        if (ch < 0x20 || ch == 0x7f) ch = '?';
      drop(fd, now, "the outer Slurm reports it " + st);
      return true;
    }
    last_[it->second.node] = now;
  }
  if (it->second.in.pending() > 1024) {
    drop(fd, now, "agent sent too much");
    return true;
  }
  return false;
}

bool NodeWatch::alive(const std::string& node, double now) const {
  for (auto& [fd, c] : conns_)
    if (c.node == node) {
      auto l = last_.find(node);
      return timeout_ <= 0 || (l != last_.end() && now - l->second <= timeout_);
    }
  return false;
}

std::vector<std::string> NodeWatch::sweep(State& st, double now) {
  // heartbeats that arrived while the daemon was busy count: read them first
  std::vector<pollfd> p;
  for (auto& [fd, c] : conns_) p.push_back({fd, POLLIN, 0});
  if (!p.empty() && ::poll(p.data(), p.size(), 0) > 0)
    for (auto& q : p)
      if (q.revents & (POLLIN | POLLHUP | POLLERR)) on_readable(q.fd, now);
  std::vector<std::string> down;
  if (timeout_ <= 0) {
    lost_.clear();
    return down;
  }
  std::map<std::string, std::string> why;
  for (auto& [node, w] : lost_) why[node] = w;
  if (now - started_ > timeout_) {
    std::map<std::string, bool> connected;
    for (auto& [fd, c] : conns_) connected[c.node] = true;
    for (auto& n : st.nodes()) {
      if (n.state == "down" || why.count(n.name)) continue;
      // silence counts from the last heartbeat, the daemon's start or the
      // node's last state change (a resumed node gets a full timeout)
      double since = std::max(started_, n.reason_time.value_or(0));
      auto l = last_.find(n.name);
      if (l != last_.end()) since = std::max(since, l->second);
      if (now - since > timeout_)
        why[n.name] = connected.count(n.name) ? "no heartbeat for " + std::to_string(static_cast<int>(timeout_)) + " s"
                                              : "no agent";
    }
  }
  lost_.clear();
  if (why.empty()) return down;
  for (auto& n : st.nodes())
    if (why.count(n.name) && n.state != "down") down.push_back(n.name);
  if (down.empty()) return down;
  st.update_nodes(down, "down", kNotResponding, static_cast<int64_t>(::getuid()), now);
  for (auto& n : down) log_("node " + n + " is DOWN: " + kNotResponding + " (" + why[n] + ")");
  return down;
}

proto::json update_node_request(State& st, uid_t peer, const proto::json& m, double now) {
  if (peer != 0 && peer != ::getuid())
    return {{"error", "update node: Access/permission denied (only the cluster's owner or root)"}};
  auto str = [&](const char* k) -> std::optional<std::string> {
    if (!m.contains(k) || !m[k].is_string()) return std::nullopt;
    return m[k].get<std::string>();
  };
  auto nodes = str("nodes");
  auto state = str("state");
  std::string reason = str("reason").value_or("");
  if (!nodes || nodes->empty() || nodes->size() > 4096) return {{"error", "update node: a node list (at most 4096 characters) is needed"}};
  if (!state) return {{"error", "update node: state=down|drain|resume is needed"}};
  if (reason.size() > 256) return {{"error", "update node: the reason is longer than 256 characters"}};
  for (unsigned char c : reason)
    if (c < 0x20 || c == 0x7f) return {{"error", "update node: the reason holds a control character"}};
  std::vector<std::string> names;
  try {
    if (*nodes == "ALL" || *nodes == "all") {
      for (auto& n : st.nodes()) names.push_back(n.name);
    } else {
      names = expand_hostlist(*nodes);
    }
    if (names.size() > 100000) return {{"error", "update node: too many nodes"}};
    auto done = st.update_nodes(names, *state, reason, static_cast<int64_t>(peer), now);
    proto::json out = proto::json::array();
    for (auto& d : done) out.push_back({{"name", d.name}, {"from", d.from}, {"to", d.to}});
    return {{"ok", true}, {"nodes", out}};
  } catch (const std::exception& e) {
    return {{"error", std::string("update node: ") + e.what()}};
  }
}

}  // namespace dynres::schedd
