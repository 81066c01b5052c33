// taskbag — see taskbag.hpp.
#include "taskbag.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdarg>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "dynres/hostlist.hpp"
#include "dynres/proto.hpp"
#include "mj.h"

namespace taskbag {

namespace proto = dynres::proto;
using json = proto::json;

namespace {

constexpr int kMaxParams = 16;
constexpr size_t kMaxNodeName = 255;
constexpr int kMaxWorkers = 4096;

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw std::runtime_error("cannot read /proc/self/exe");
  buf[n] = 0;
  return buf;
}

/// Connect to the coordinator's socket; a path longer than sun_path is
/// reached relative to its directory.
int connect_coordinator(const std::string& path) {
  if (path.size() < 100) return proto::connect_unix(path, 5000);
  auto slash = path.rfind('/');
  if (slash == std::string::npos) return -1;
  if (::chdir(path.substr(0, slash).c_str()) != 0) return -1;
  return proto::connect_unix(path.substr(slash + 1), 5000);
}

bool get_u64(const json& j, const char* key, uint64_t& out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return false;
  out = it->get<uint64_t>();
  return true;
}

}  // namespace

bool is_worker(int argc, char** argv) { return argc >= 2 && std::strcmp(argv[1], "--taskbag-worker") == 0; }

// ------------------------------------------------------------------ worker
int worker_main(int argc, char** argv, App& app) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "%s worker: usage: %s --taskbag-worker SOCKET [NODE]\n", app.name.c_str(), argv[0]);
    return 2;
  }
  std::string node = argc == 4 ? argv[3] : "";
  if (const char* e = std::getenv("MJ_NODE"); e && *e) node = e;
  if (node.empty()) {
    char h[256] = {0};
    ::gethostname(h, sizeof h - 1);
    node = h;
  }
  if (node.size() > kMaxNodeName) node.resize(kMaxNodeName);
  int fd = connect_coordinator(argv[2]);
  if (fd < 0) {
    std::fprintf(stderr, "%s worker on %s: cannot connect to the coordinator at %s\n", app.name.c_str(),
                 node.c_str(), argv[2]);
    return 1;
  }
  try {
    proto::send_frame(fd, {{"op", "hello"}, {"node", node}, {"pid", static_cast<int64_t>(::getpid())}});
    double sleep_ms = 0;
    bool configured = false;
    uint64_t ntasks = 0;
    for (;;) {
      auto m = proto::recv_frame(fd, -1);
      if (!m) return configured ? 0 : 1;  // the coordinator went away
      std::string op = m->value("op", "");
      if (op == "stop") return 0;
      if (op == "config" && !configured) {
        auto it = m->find("params");
        if (it == m->end() || !it->is_array() || it->size() > kMaxParams)
          throw std::runtime_error("config without a valid params array");
        std::vector<uint64_t> p;
        for (auto& v : *it) {
          if (!v.is_number_unsigned()) throw std::runtime_error("config: a parameter is not an unsigned integer");
          p.push_back(v.get<uint64_t>());
        }
        auto s = m->find("sleep_ms");
        if (s != m->end()) {
          if (!s->is_number() || !(s->get<double>() >= 0 && s->get<double>() <= 60000))
            throw std::runtime_error("config: sleep_ms out of range [0, 60000]");
          sleep_ms = s->get<double>();
        }
        app.setup(p);
        ntasks = app.num_tasks();
        configured = true;
        continue;
      }
      uint64_t id;
      if (op == "task" && configured && get_u64(*m, "id", id) && id < ntasks) {
        uint64_t v = app.compute(id);
        if (sleep_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleep_ms));
        proto::send_frame(fd, {{"op", "result"}, {"id", id}, {"value", v}});
        continue;
      }
      throw std::runtime_error("unexpected message from the coordinator: " + m->dump().substr(0, 200));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s worker on %s: %s\n", app.name.c_str(), node.c_str(), e.what());
    ::close(fd);
    return 1;
  }
}

// ------------------------------------------------------------- coordinator
namespace {

struct Worker {
  std::string node;
  bool hello = false;
  int64_t task = -1;     ///< task held, -1 none
  bool leaving = false;  ///< gets "stop" instead of its next task
  bool stopped = false;  ///< "stop" sent
};

struct Proc {
  pid_t pid;
  std::string node;
  int64_t order;  ///< expand order that started it (0: at the start)
};

struct Adaptation {
  bool active = false;
  bool failed = false;  ///< a launch failed: not committed, waiting for the rollback
  int64_t id = 0;
  mj_order_kind kind = MJ_ORDER_NONE;
  bool named = true;
  int before = 0, after = 0;
  std::vector<std::string> nodes;  ///< added (expand) or released (shrink)
  std::set<std::string> waiting;   ///< expand: not yet said hello; shrink: not yet gone
  double t0 = 0;                   ///< order received (monotonic s)
};

class Coordinator {
 public:
  Coordinator(App& app, const Options& opt) : app_(app), opt_(opt) {}
  int run();

 private:
  App& app_;
  const Options& opt_;
  bool mj_ = false, registered_ = false, deregistered_ = false, probing_ = false;
  std::string sock_dir_, sock_path_, exe_, my_node_;
  int lfd_ = -1;
  std::map<int, Worker> workers_;  // by fd
  std::vector<Proc> procs_;
  std::vector<std::string> nodes_;  // the job's nodes now
  std::deque<uint64_t> bag_;
  std::vector<char> done_;
  uint64_t ndone_ = 0, sum_ = 0;
  Adaptation ad_;
  Stats st_;
  double t_start_ = 0, last_probe_ = 0, last_progress_ = 0;
  int fatal_ = 0;

  void log(const char* fmt, ...) __attribute__((format(printf, 2, 3)));
  void setup_socket();
  void cleanup_socket();
  bool launch(const std::string& node, int64_t order);
  void accept_new();
  void drop(int fd, const char* why);
  void handle(int fd);
  void dispatch();
  void reap();
  void probe();
  void start_order(const mj_order& o);
  void progress_adaptation();
  void commit();
  void undo(const char* why);
  bool has_worker(const std::string& node) const;
  bool has_proc(const std::string& node) const;
  void send(int fd, const json& j);
  void stop_all_and_wait();
  int alive_workers() const;
};

void Coordinator::log(const char* fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "%s: %s\n", app_.name.c_str(), buf);
}

void Coordinator::setup_socket() {
  // A private directory under the working directory: the socket is reachable
  // by the workers on every node of a one-machine cluster, and only by us.
  // Where the working directory is not writable: under $TMPDIR (or /tmp).
  char cwd[PATH_MAX];
  if (!::getcwd(cwd, sizeof cwd)) throw std::runtime_error("getcwd failed");
  std::string base = cwd;
  std::string name = "." + app_.name + "-taskbag.XXXXXX";
  std::string tmpl = base + "/" + name;
  std::vector<char> t(tmpl.begin(), tmpl.end());
  t.push_back(0);
  if (!::mkdtemp(t.data())) {
    const char* td = std::getenv("TMPDIR");
    std::string alt = std::string(td && *td ? td : "/tmp") + "/" + name;
    log("cannot create the socket directory in %s (%s): using %s", cwd, std::strerror(errno), alt.c_str());
    t.assign(alt.begin(), alt.end());
    t.push_back(0);
    if (!::mkdtemp(t.data())) throw std::runtime_error(std::string("mkdtemp ") + alt + ": " + std::strerror(errno));
  }
  sock_dir_ = t.data();
  sock_path_ = sock_dir_ + "/s";
  // a path longer than sun_path is bound relative to the working directory
  std::string rel = sock_path_;
  if (rel.size() >= 100 && rel.compare(0, base.size() + 1, base + "/") == 0) rel = "./" + rel.substr(base.size() + 1);
  lfd_ = proto::listen_unix(rel);
  ::fcntl(lfd_, F_SETFL, ::fcntl(lfd_, F_GETFL) | O_NONBLOCK);
}

void Coordinator::cleanup_socket() {
  if (lfd_ >= 0) ::close(lfd_);
  lfd_ = -1;
  if (!sock_path_.empty()) {
    ::unlink(sock_path_.c_str());
    ::rmdir(sock_dir_.c_str());
  }
}

bool Coordinator::launch(const std::string& node, int64_t order) {
  std::vector<std::string> args = {exe_, "--taskbag-worker", sock_path_, node};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (mj_) {
    int rc = mj_launch(node.c_str(), argv.data(), &pid);
    if (rc != MJ_OK) {
      log("cannot start a worker on %s: %s", node.c_str(), mj_strerror(rc));
      return false;
    }
  } else {
    pid = ::fork();
    if (pid < 0) {
      log("fork: %s", std::strerror(errno));
      return false;
    }
    if (pid == 0) {
      ::execv(argv[0], argv.data());
      std::_Exit(127);
    }
  }
  procs_.push_back({pid, node, order});
  if (opt_.verbose) log("worker started on %s (pid %d)", node.c_str(), static_cast<int>(pid));
  return true;
}

void Coordinator::send(int fd, const json& j) {
  try {
    proto::send_frame(fd, j);
  } catch (const std::exception& e) {
    drop(fd, e.what());
  }
}

void Coordinator::accept_new() {
  for (;;) {
    int fd = ::accept4(lfd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    struct ucred cr {};
    socklen_t len = sizeof cr;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || cr.uid != ::getuid()) {
      log("refused a connection from uid %d", static_cast<int>(cr.uid));
      ::close(fd);
      continue;
    }
    if (static_cast<int>(workers_.size()) >= kMaxWorkers) {
      log("refused a connection: %d workers already", kMaxWorkers);
      ::close(fd);
      continue;
    }
    workers_[fd] = Worker{};
  }
}

void Coordinator::drop(int fd, const char* why) {
  auto it = workers_.find(fd);
  if (it == workers_.end()) return;
  Worker& w = it->second;
  if (w.task >= 0) {  // hand the task back
    bag_.push_front(static_cast<uint64_t>(w.task));
    if (!w.stopped || opt_.verbose) log("worker on %s left (%s); task %lld back in the bag", w.node.c_str(), why,
                                        static_cast<long long>(w.task));
  } else if (!w.hello) {
    log("dropped a connection before its hello (%s)", why);
  } else if (!w.stopped) {
    log("worker on %s left (%s)", w.node.c_str(), why);
  }
  ::close(fd);
  workers_.erase(it);
}

void Coordinator::handle(int fd) {
  std::optional<json> m;
  try {
    m = proto::recv_frame(fd, 1000);
  } catch (const std::exception& e) {
    drop(fd, e.what());
    return;
  }
  if (!m) {
    drop(fd, "connection closed");
    return;
  }
  Worker& w = workers_[fd];
  std::string op = m->is_object() ? m->value("op", "") : "";
  if (op == "hello" && !w.hello) {
    auto n = m->find("node");
    if (n == m->end() || !n->is_string() || n->get<std::string>().empty() ||
        n->get<std::string>().size() > kMaxNodeName) {
      drop(fd, "hello without a valid node name");
      return;
    }
    const std::string node = n->get<std::string>();
    w.node = node;
    w.hello = true;
    if (ad_.active && ad_.kind == MJ_ORDER_EXPAND) ad_.waiting.erase(node);
    json params = json::array();
    for (auto p : app_.params) params.push_back(p);
    send(fd, {{"op", "config"}, {"params", params}, {"sleep_ms", opt_.task_sleep_ms}});
    st_.workers_max = std::max(st_.workers_max, alive_workers());
    if (opt_.verbose) log("worker on %s connected", node.c_str());
    return;
  }
  uint64_t id, value;
  if (op == "result" && w.hello && get_u64(*m, "id", id) && get_u64(*m, "value", value) && w.task >= 0 &&
      id == static_cast<uint64_t>(w.task)) {
    w.task = -1;
    if (!done_[id]) {
      done_[id] = 1;
      ++ndone_;
      sum_ += value;
    }
    return;
  }
  drop(fd, ("protocol violation: " + m->dump().substr(0, 200)).c_str());
}

int Coordinator::alive_workers() const {
  int n = 0;
  for (auto& [fd, w] : workers_)
    if (w.hello && !w.stopped) ++n;
  return n;
}

void Coordinator::dispatch() {
  std::vector<int> fds;
  for (auto& [fd, w] : workers_)
    if (w.hello && w.task < 0 && !w.stopped) fds.push_back(fd);
  for (int fd : fds) {
    auto it = workers_.find(fd);
    if (it == workers_.end()) continue;
    Worker& w = it->second;
    if (w.leaving) {
      w.stopped = true;
      send(fd, {{"op", "stop"}});
      continue;
    }
    if (bag_.empty()) continue;
    uint64_t id = bag_.front();
    bag_.pop_front();
    if (done_[id]) continue;
    w.task = static_cast<int64_t>(id);
    send(fd, {{"op", "task"}, {"id", id}});
  }
}

void Coordinator::reap() {
  for (;;) {
    int status;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) return;
    auto it = std::find_if(procs_.begin(), procs_.end(), [&](const Proc& p) { return p.pid == pid; });
    if (it == procs_.end()) continue;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && opt_.verbose) log("worker process on %s (pid %d) ended with status %d", it->node.c_str(), pid, status);
    if (ad_.active && ad_.kind == MJ_ORDER_EXPAND && it->order == ad_.id && ad_.waiting.count(it->node)) {
      log("the worker started on %s ended before connecting: expand %lld is left to roll back", it->node.c_str(),
          static_cast<long long>(ad_.id));
      ad_.failed = true;
      // stop the other workers of this order now; the scheduler rolls it back
      for (auto& p : procs_)
        if (p.order == ad_.id && p.pid != pid) ::kill(p.pid, SIGTERM);
    }
    procs_.erase(it);
  }
}

bool Coordinator::has_worker(const std::string& node) const {
  for (auto& [fd, w] : workers_)
    if (w.node == node) return true;
  return false;
}
bool Coordinator::has_proc(const std::string& node) const {
  for (auto& p : procs_)
    if (p.node == node) return true;
  return false;
}

void Coordinator::probe() {
  if (!probing_) return;
  double t = now_s();
  if (t - last_probe_ < 0.005) return;
  last_probe_ = t;
  int pending = 0;
  mj_order o{};
  int rc = mj_probe_adapt(&pending, nullptr, &o);
  if (rc != MJ_OK) {
    log("mj_probe_adapt: %s (%s): continuing at %zu node(s) without orders", mj_strerror(rc), mj_last_error(),
        nodes_.size());
    probing_ = false;
    return;
  }
  if (pending == -1) {
    if (ad_.active) undo("rolled back by the scheduler");
    return;
  }
  if (pending == 1 && !ad_.active) start_order(o);
}

void Coordinator::start_order(const mj_order& o) {
  ad_ = Adaptation{};
  ad_.t0 = now_s();
  ad_.id = o.id;
  ad_.kind = o.kind;
  ad_.named = o.named != 0;
  ad_.before = static_cast<int>(nodes_.size());
  ad_.after = o.num_nodes_after;
  if (o.kind != MJ_ORDER_EXPAND && o.kind != MJ_ORDER_SHRINK) {
    log("order %lld of unknown kind %d ignored", static_cast<long long>(o.id), static_cast<int>(o.kind));
    return;
  }
  if (o.num_nodes < 0 || o.num_nodes > MJ_MAX_ORDER_NODES || (o.num_nodes > 0 && !o.nodes)) {
    log("order %lld with a bad node list ignored", static_cast<long long>(o.id));
    return;
  }
  for (int i = 0; i < o.num_nodes; ++i) ad_.nodes.push_back(o.nodes[i] ? o.nodes[i] : "");
  int rc = mj_adapt_begin(&o, 0);
  if (rc != MJ_OK) {
    log("mj_adapt_begin(order %lld): %s %s", static_cast<long long>(o.id), mj_strerror(rc), mj_last_error());
    return;
  }
  ad_.active = true;
  if (opt_.verbose)
    log("order %lld: %s by %d node(s) (%d -> %d)", static_cast<long long>(o.id),
        o.kind == MJ_ORDER_EXPAND ? "expand" : "shrink", o.count, o.num_nodes_before, o.num_nodes_after);
  if (o.kind == MJ_ORDER_EXPAND) {
    for (auto& n : ad_.nodes) {
      if (n.empty() || n.size() > kMaxNodeName) {
        ad_.failed = true;
        continue;
      }
      ad_.waiting.insert(n);
      if (!launch(n, o.id)) ad_.failed = true;
    }
    if (ad_.failed) {
      log("expand %lld: not every worker could be started; left to roll back", static_cast<long long>(o.id));
      for (auto& p : procs_)
        if (p.order == o.id) ::kill(p.pid, SIGTERM);
    }
    return;
  }
  // shrink
  if (!ad_.named) {  // the coordinator chooses: the most recently added nodes, never its own
    int count = std::clamp(o.count, 0, static_cast<int>(nodes_.size()));
    for (auto it = nodes_.rbegin(); it != nodes_.rend() && static_cast<int>(ad_.nodes.size()) < count; ++it)
      if (*it != my_node_) ad_.nodes.push_back(*it);
    if (static_cast<int>(ad_.nodes.size()) < o.count) {
      log("shrink %lld asks for %d of my %zu node(s) besides my own: left to roll back", static_cast<long long>(o.id),
          o.count, nodes_.size());
      ad_.failed = true;
      return;
    }
  }
  for (auto& n : ad_.nodes) {
    if (n == my_node_) log("shrink %lld releases the coordinator's node %s: its worker stops, the coordinator stays",
                           static_cast<long long>(o.id), n.c_str());
    ad_.waiting.insert(n);
    for (auto& [fd, w] : workers_)
      if (w.node == n) w.leaving = true;
  }
}

void Coordinator::progress_adaptation() {
  if (!ad_.active || ad_.failed) return;
  if (ad_.kind == MJ_ORDER_SHRINK)
    for (auto it = ad_.waiting.begin(); it != ad_.waiting.end();)
      it = (!has_worker(*it) && !has_proc(*it)) ? ad_.waiting.erase(it) : std::next(it);
  if (ad_.waiting.empty() && now_s() >= ad_.t0 + opt_.commit_delay_ms / 1000) commit();
}

void Coordinator::commit() {
  std::vector<const char*> rel;
  if (ad_.kind == MJ_ORDER_SHRINK && !ad_.named)
    for (auto& n : ad_.nodes) rel.push_back(n.c_str());
  int rc = mj_adapt_commit(ad_.id, rel.empty() ? nullptr : rel.data(), static_cast<int>(rel.size()));
  double lat = now_s() - ad_.t0;
  if (rc == MJ_ERR_ROLLED_BACK) {
    undo("commit answered: rolled back");
    return;
  }
  if (rc != MJ_OK) {
    log("mj_adapt_commit(order %lld): %s %s", static_cast<long long>(ad_.id), mj_strerror(rc), mj_last_error());
    undo("commit failed");
    return;
  }
  bool grow = ad_.kind == MJ_ORDER_EXPAND;
  if (grow) {
    for (auto& n : ad_.nodes) nodes_.push_back(n);
    ++st_.expands;
  } else {
    for (auto& n : ad_.nodes) nodes_.erase(std::remove(nodes_.begin(), nodes_.end(), n), nodes_.end());
    ++st_.shrinks;
  }
  std::printf("resize %s %d->%zu latency_s=%.6f order=%lld\n", grow ? "expand" : "shrink", ad_.before, nodes_.size(),
              lat, static_cast<long long>(ad_.id));
  std::fflush(stdout);
  ad_ = Adaptation{};
}

void Coordinator::undo(const char* why) {
  log("order %lld (%s) %s: undoing it", static_cast<long long>(ad_.id),
      ad_.kind == MJ_ORDER_EXPAND ? "expand" : "shrink", why);
  ++st_.rollbacks;
  if (ad_.kind == MJ_ORDER_EXPAND) {
    std::set<std::string> added(ad_.nodes.begin(), ad_.nodes.end());
    for (auto& [fd, w] : workers_)
      if (added.count(w.node)) w.leaving = true;  // stopped at their next hand-out
    for (auto& p : procs_)
      if (p.order == ad_.id && !has_worker(p.node)) ::kill(p.pid, SIGTERM);  // not connected yet
  } else if (ad_.kind == MJ_ORDER_SHRINK) {
    for (auto& n : ad_.nodes) {
      for (auto& [fd, w] : workers_)
        if (w.node == n) w.leaving = false;
      bool running = false;
      for (auto& [fd, w] : workers_)
        if (w.node == n && !w.stopped) running = true;
      if (!running && std::find(nodes_.begin(), nodes_.end(), n) != nodes_.end()) launch(n, 0);
    }
  }
  ad_ = Adaptation{};
}

void Coordinator::stop_all_and_wait() {
  for (auto& [fd, w] : workers_) {
    if (!w.stopped) {
      try {
        proto::send_frame(fd, {{"op", "stop"}});
      } catch (...) {
      }
    }
    ::close(fd);
  }
  workers_.clear();
  double until = now_s() + 10;
  while (!procs_.empty()) {
    reap();
    if (procs_.empty()) break;
    if (now_s() > until) {
      for (auto& p : procs_) ::kill(p.pid, SIGKILL);
      until = now_s() + 5;
    }
    ::usleep(2000);
  }
}

int Coordinator::run() {
  t_start_ = now_s();
  exe_ = self_exe();
  done_.assign(app_.ntasks, 0);
  for (uint64_t k = 0; k < app_.ntasks; ++k) bag_.push_back(k);
  ::signal(SIGPIPE, SIG_IGN);

  mj_status ms{};
  int rc = mj_init_adapt(&ms);
  if (rc == MJ_OK) {
    mj_ = true;
    try {
      nodes_ = dynres::expand_hostlist(ms.nodelist ? ms.nodelist : "");
    } catch (const std::exception& e) {
      log("the job's node list '%s' is malformed: %s", ms.nodelist ? ms.nodelist : "", e.what());
      return 1;
    }
    if (nodes_.empty() || static_cast<int>(nodes_.size()) > kMaxWorkers) {
      log("the job has %zu node(s): cannot run", nodes_.size());
      return 1;
    }
    my_node_ = (ms.node && *ms.node) ? ms.node : nodes_.front();
    if (ms.kind == MJ_RESUMED && ms.order > 0) {  // run again after a restart-based resize: nothing to restore
      int c = mj_adapt_commit(ms.order, nullptr, 0);
      if (c != MJ_OK) log("commit of order %lld after the restart: %s", static_cast<long long>(ms.order), mj_strerror(c));
    }
    int r = mj_register();
    if (r == MJ_OK) {
      registered_ = probing_ = true;
    } else {
      log("mj_register: %s %s: running rigid on %zu node(s)", mj_strerror(r), mj_last_error(), nodes_.size());
    }
  } else {
    if (rc != MJ_ERR_ENV)
      log("mj_init_adapt: %s %s: running fixed-size with %d local worker(s)", mj_strerror(rc), mj_last_error(),
          opt_.workers);
    for (int i = 0; i < opt_.workers; ++i) nodes_.push_back("local" + std::to_string(i));
    my_node_ = nodes_.front();
  }
  try {
    setup_socket();
  } catch (const std::exception& e) {
    log("cannot listen for workers: %s", e.what());
    return 1;
  }
  int started = 0;
  for (auto& n : nodes_) started += launch(n, 0) ? 1 : 0;
  st_.workers_start = started;
  if (started == 0) {
    log("no worker could be started");
    cleanup_socket();
    return 1;
  }
  double t_nowork = 0;
  while (ndone_ < app_.ntasks) {
    std::vector<pollfd> pfds;
    pfds.push_back({lfd_, POLLIN, 0});
    for (auto& [fd, w] : workers_) pfds.push_back({fd, POLLIN, 0});
    int timeout = probing_ ? 10 : 100;
    if (::poll(pfds.data(), pfds.size(), timeout) < 0 && errno != EINTR) {
      log("poll: %s", std::strerror(errno));
      fatal_ = 1;
      break;
    }
    for (auto& p : pfds) {
      if (!p.revents) continue;
      if (p.fd == lfd_) accept_new();
      else if (workers_.count(p.fd)) handle(p.fd);
    }
    reap();
    dispatch();
    probe();
    progress_adaptation();
    dispatch();
    double t = now_s();
    if (mj_ && t - last_progress_ >= 0.5) {
      last_progress_ = t;
      mj_report_progress(static_cast<double>(ndone_) / static_cast<double>(app_.ntasks));
    }
    // all tasks handed out and nothing to adapt: the shutdown phase [Finnerty24]
    if (registered_ && !deregistered_ && bag_.empty() && !ad_.active) {
      int d = mj_deregister();
      if (d != MJ_OK) log("mj_deregister: %s %s", mj_strerror(d), mj_last_error());
      deregistered_ = true;
      probing_ = false;
    }
    // every task is either done, in the bag or held by a worker
    if (bag_.empty() && ndone_ < app_.ntasks &&
        std::none_of(workers_.begin(), workers_.end(), [](const auto& fw) { return fw.second.task >= 0; })) {
      log("internal error: %llu task(s) neither done, nor in the bag, nor held by a worker",
          static_cast<unsigned long long>(app_.ntasks - ndone_));
      fatal_ = 1;
      break;
    }
    // nobody left to compute: give up after 10 s (a pending expand may still bring workers)
    if (procs_.empty() && alive_workers() == 0 && !(ad_.active && ad_.kind == MJ_ORDER_EXPAND)) {
      if (t_nowork == 0) t_nowork = t;
      if (t - t_nowork > 10) {
        log("every worker is gone with %llu of %llu task(s) left", static_cast<unsigned long long>(app_.ntasks - ndone_),
            static_cast<unsigned long long>(app_.ntasks));
        fatal_ = 1;
        break;
      }
    } else {
      t_nowork = 0;
    }
  }
  st_.elapsed_s = now_s() - t_start_;
  st_.workers_end = alive_workers();
  st_.tasks = ndone_;
  if (registered_ && !deregistered_) mj_deregister();
  stop_all_and_wait();
  cleanup_socket();
  if (mj_) {
    if (!fatal_) mj_report_progress(1.0);
    mj_finalize();
  }
  if (fatal_) return 1;
  app_.print(sum_, st_);
  std::printf("taskbag tasks=%llu workers_start=%d workers_end=%d workers_max=%d expands=%d shrinks=%d rollbacks=%d elapsed_s=%.3f\n",
              static_cast<unsigned long long>(st_.tasks), st_.workers_start, st_.workers_end, st_.workers_max,
              st_.expands, st_.shrinks, st_.rollbacks, st_.elapsed_s);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int coordinator_main(App& app, const Options& opt) {
  if (app.ntasks == 0 || app.params.size() > kMaxParams) {
    std::fprintf(stderr, "%s: nothing to do (no task) or too many parameters\n", app.name.c_str());
    return 1;
  }
  if (opt.workers < 1 || opt.workers > 256) {
    std::fprintf(stderr, "%s: --workers must be in 1..256\n", app.name.c_str());
    return 1;
  }
  Coordinator c(app, opt);
  try {
    return c.run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", app.name.c_str(), e.what());
    return 1;
  }
}

}  // namespace taskbag
