// libmj: the application side of the resize protocol (include/mj.h, mj(3)).
// One connection per process to mjsched's socket; replies carry "re": OP,
// messages pushed by the scheduler (orders, rollbacks) carry "op" and are
// queued while a reply is awaited.
#include "mj.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "dynres/proto.hpp"

namespace {
using json = dynres::proto::json;
constexpr size_t kMaxReply = 256 * 1024;  // bytes; the scheduler's messages are far smaller
constexpr int kReplyMs = 10000;           // a reply takes at most this long
constexpr double kReconnectS = 30;        // after a lost connection during a commit

struct Order {
  int64_t id = 0;
  mj_order_kind kind = MJ_ORDER_NONE;
  int count = 0;
  int from = 0, to = 0;
  double deadline = 0;
  std::vector<std::string> nodes;
  std::vector<const char*> ptrs;
  bool begun = false;
  bool rolled_back = false;
  std::vector<pid_t> launched;  ///< processes mj_launch started while the order was open
};

struct Lib {
  int fd = -1;
  bool initialised = false;
  bool deregistered = false;
  bool registered = false;   ///< this process registered: re-register after a reconnect
  std::chrono::steady_clock::time_point last_try{};
  int64_t job = 0;
  std::string secret, socket, node, nodelist;
  mj_status status{};
  std::deque<json> pushed;
  std::optional<Order> order;
  /// the last settled order: its node names stay valid until the next order
  /// arrives (applications read them right after the commit)
  std::optional<Order> settled;
  std::string last_error;
  std::optional<dynres::proto::FrameReader> in;
};
Lib g;

/// The current order is settled (committed, rolled back, dropped): keep its
/// storage alive as the last settled order (moving the vector keeps the
/// strings, so pointers handed out stay valid).
void settle_order() {
  if (!g.order) return;
  g.settled = std::move(g.order);
  g.order.reset();
}

int fail(int code, const std::string& msg) {
  g.last_error = msg;
  return code;
}

std::optional<int64_t> env_int(const char* k, int64_t lo, int64_t hi) {
  const char* v = std::getenv(k);
  if (!v || !*v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (errno || *end || x < lo || x > hi) return std::nullopt;
  return x;
}

void drop_connection() {
  if (g.fd >= 0) ::close(g.fd);
  g.fd = -1;
  g.in.reset();
}

/// Read frames into the push queue until the reply to op arrives (returned)
/// or timeout_ms passes (std::nullopt; 0 = only what is there now, -1 =
/// forever; op "" = never a reply). Throws ProtoError when the connection
/// is lost or a frame is bad.
std::optional<json> read_until(const std::string& op, int timeout_ms) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max(0, timeout_ms));
  for (;;) {
    while (auto m = g.in->next()) {
      if (!m->is_object()) throw dynres::proto::ProtoError("a message from the scheduler is not an object");
      if (m->contains("re")) {
        if (!op.empty() && (*m)["re"] == op) return m;
        continue;  // a stale reply (an earlier request that timed out)
      }
      g.pushed.push_back(std::move(*m));
    }
    if (op.empty() && !g.pushed.empty()) return std::nullopt;  // an order arrived: the waiter wants it now
    int left = -1;
    if (timeout_ms >= 0)
      left = static_cast<int>(std::max<long long>(
          0, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count()));
    pollfd p{g.fd, POLLIN, 0};
    int r = ::poll(&p, 1, left);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return std::nullopt;
    if (!g.in->fill(g.fd)) throw dynres::proto::ProtoError("the scheduler closed the connection");
  }
}

int connect_and_hello() {
  drop_connection();
  int fd = dynres::proto::connect_unix(g.socket, 2000);
  if (fd < 0) return fail(MJ_ERR_CONNECT, "cannot connect to the scheduler at " + g.socket);
  g.fd = fd;
  g.in.emplace(kMaxReply);
  try {
    dynres::proto::send_frame(fd, {{"op", "mj_hello"}, {"job", g.job}, {"secret", g.secret}});
    auto rep = read_until("mj_hello", kReplyMs);
    if (!rep) {
      drop_connection();
      return fail(MJ_ERR_CONNECT, "the scheduler did not answer");
    }
    if (rep->contains("error")) {
      std::string e = (*rep)["error"].is_string() ? (*rep)["error"].get<std::string>() : "refused";
      drop_connection();
      return fail(MJ_ERR_AUTH, e);
    }
    if (rep->contains("nodelist") && (*rep)["nodelist"].is_string()) g.nodelist = (*rep)["nodelist"];
    if (rep->contains("order") && (*rep)["order"].is_object()) {
      json o = (*rep)["order"];
      bool begun = o.value("begun", false);
      g.pushed.push_front(o);
      if (begun) g.pushed.front()["begun"] = true;
    }
  } catch (const std::exception& e) {
    drop_connection();
    return fail(MJ_ERR_CONNECT, e.what());
  }
  return MJ_OK;
}

int ensure_env() {
  if (g.job > 0) return MJ_OK;
  auto job = env_int("MJ_JOB_ID", 1, INT64_MAX);
  const char* sec = std::getenv("MJ_SECRET");
  const char* sock = std::getenv("MJ_SOCKET");
  if (!job || !sec || !*sec || !sock || !*sock)
    return fail(MJ_ERR_ENV, "not inside a dynres job (MJ_JOB_ID, MJ_SECRET and MJ_SOCKET are needed)");
  g.job = *job;
  g.secret = sec;
  g.socket = sock;
  const char* node = std::getenv("MJ_NODE");
  g.node = node ? node : "";
  const char* nl = std::getenv("MJ_JOB_NODELIST");
  g.nodelist = nl ? nl : "";
  return MJ_OK;
}

int request(const json& body, json* out);

int ensure_connected() {
  if (int r = ensure_env(); r != MJ_OK) return r;
  if (g.fd >= 0) return MJ_OK;
  if (int r = connect_and_hello(); r != MJ_OK) return r;
  // a new connection (the scheduler restarted) keeps this process's
  // registration, whichever call reconnected (a perf report often does)
  if (g.registered && !g.deregistered) return request({{"op", "mj_register"}}, nullptr);
  return MJ_OK;
}

/// Send a request and wait for its reply. MJ_OK with *out set, or an error.
int request(const json& body, json* out) {
  if (int r = ensure_connected(); r != MJ_OK) return r;
  std::string op = body["op"];
  try {
    dynres::proto::send_frame(g.fd, body);
    auto rep = read_until(op, kReplyMs);
    if (!rep) {
      drop_connection();
      return fail(MJ_ERR_CONNECT, "the scheduler did not answer " + op);
    }
    if (out) *out = *rep;
    if (rep->contains("error")) {
      g.last_error = (*rep)["error"].is_string() ? (*rep)["error"].get<std::string>() : "refused";
      if (rep->value("rolled_back", false)) return MJ_ERR_ROLLED_BACK;
      return MJ_ERR_REFUSED;
    }
  } catch (const std::exception& e) {
    drop_connection();
    return fail(MJ_ERR_CONNECT, e.what());
  }
  return MJ_OK;
}

/// Kill what mj_launch started during a rolled-back order. Only children not
/// yet reaped by the application are signalled: while a child is unreaped
/// (running or zombie) its pid cannot be reused, so the signal never reaches
/// an unrelated process (waitid with WNOWAIT leaves the reaping to the app).
void kill_launched(Order& o) {
  for (pid_t p : o.launched) {
    siginfo_t si{};
    if (::waitid(P_PID, static_cast<id_t>(p), &si, WEXITED | WNOHANG | WNOWAIT) == 0) ::kill(p, SIGKILL);
  }
  o.launched.clear();
}

/// Fold pushed messages into the current order.
int absorb() {
  while (!g.pushed.empty()) {
    json m = std::move(g.pushed.front());
    g.pushed.pop_front();
    std::string op = m.value("op", "");
    auto num = [&](const char* k, int64_t lo, int64_t hi) -> std::optional<int64_t> {
      if (!m.contains(k) || !m[k].is_number_integer()) return std::nullopt;
      int64_t v = m[k].get<int64_t>();
      if (v < lo || v > hi) return std::nullopt;
      return v;
    };
    if (op == "mj_order") {
      auto id = num("order", 1, INT64_MAX);
      auto from = num("from", 0, INT_MAX), to = num("to", 0, INT_MAX), count = num("count", 0, MJ_MAX_ORDER_NODES);
      std::string kind = m.value("kind", "");
      if (!id || !from || !to || !count || (kind != "expand" && kind != "shrink") || !m.contains("nodes") ||
          !m["nodes"].is_array() || m["nodes"].size() > MJ_MAX_ORDER_NODES)
        return fail(MJ_ERR_PROTO, "malformed order from the scheduler");
      if (g.order && g.order->id == *id) continue;  // the same order again (after a reconnect)
      Order o;
      o.id = *id;
      o.kind = kind == "expand" ? MJ_ORDER_EXPAND : MJ_ORDER_SHRINK;
      o.from = static_cast<int>(*from);
      o.to = static_cast<int>(*to);
      o.count = static_cast<int>(*count);
      o.deadline = m.contains("deadline") && m["deadline"].is_number() ? m["deadline"].get<double>() : 0;
      o.begun = m.value("begun", false);
      for (auto& n : m["nodes"]) {
        if (!n.is_string()) return fail(MJ_ERR_PROTO, "malformed order from the scheduler");
        o.nodes.push_back(n.get<std::string>());
      }
      if (o.kind == MJ_ORDER_EXPAND) o.count = static_cast<int>(o.nodes.size());
      else if (!o.nodes.empty()) o.count = static_cast<int>(o.nodes.size());
      for (auto& n : o.nodes) o.ptrs.push_back(n.c_str());
      g.order = std::move(o);
    } else if (op == "mj_rollback") {
      auto id = num("order", 1, INT64_MAX);
      if (id && g.order && g.order->id == *id) {
        g.order->rolled_back = true;
        kill_launched(*g.order);
      }
    }
  }
  return MJ_OK;
}

void fill_order(mj_order* out, const Order& o) {
  out->id = o.id;
  out->kind = o.kind;
  out->count = o.count;
  out->named = o.nodes.empty() ? 0 : 1;
  out->num_nodes_before = o.from;
  out->num_nodes_after = o.to;
  out->deadline = o.deadline;
  out->num_nodes = static_cast<int>(o.nodes.size());
  out->nodes = o.ptrs.empty() ? nullptr : o.ptrs.data();
}

int probe(int timeout_ms, int* pending, mj_role* role, mj_order* order) {
  if (!pending) return fail(MJ_ERR_ARG, "pending is NULL");
  *pending = 0;
  if (!g.initialised) return fail(MJ_ERR_STATE, "mj_init_adapt was not called");
  if (g.fd < 0) {
    // the scheduler went away (restart): try again at most once a second
    auto t = std::chrono::steady_clock::now();
    if (t - g.last_try < std::chrono::seconds(1)) return fail(MJ_ERR_CONNECT, "no connection to the scheduler");
    g.last_try = t;
    if (int r = ensure_connected(); r != MJ_OK) return r;  // registers again
  }
  if (int r = absorb(); r != MJ_OK) return r;
  auto ready = [&] { return g.order && (g.order->rolled_back ? g.order->begun : !g.order->begun); };
  if (!ready()) {
    try {
      if (timeout_ms != 0) {
        auto t0 = std::chrono::steady_clock::now();
        while (!ready()) {
          int left = -1;
          if (timeout_ms > 0) {
            auto spent =
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
            if (spent >= timeout_ms) break;
            left = static_cast<int>(timeout_ms - spent);
          }
          read_until("", left < 0 ? 1000 : std::min(left, 1000));
          if (int r = absorb(); r != MJ_OK) return r;
        }
      } else {
        read_until("", 0);
        if (int r = absorb(); r != MJ_OK) return r;
      }
    } catch (const std::exception& e) {
      drop_connection();
      return fail(MJ_ERR_CONNECT, e.what());
    }
  }
  if (!g.order) return MJ_OK;
  Order& o = *g.order;
  if (o.rolled_back) {
    if (o.begun) {
      *pending = -1;
      if (order) fill_order(order, o);
      settle_order();
    } else {
      settle_order();  // never begun: nothing to undo
    }
    return MJ_OK;
  }
  if (o.begun) return MJ_OK;
  *pending = 1;
  if (order) fill_order(order, o);
  if (role) {
    *role = MJ_ROLE_STAY;
    if (o.kind == MJ_ORDER_SHRINK)
      for (auto& n : o.nodes)
        if (!g.node.empty() && n == g.node) *role = MJ_ROLE_LEAVE;
  }
  return MJ_OK;
}
}  // namespace

extern "C" {

int mj_init_adapt(mj_status* st) {
  if (!st) return fail(MJ_ERR_ARG, "st is NULL");
  if (g.initialised) {
    *st = g.status;
    return MJ_OK;
  }
  if (int r = ensure_env(); r != MJ_OK) return r;
  if (int r = connect_and_hello(); r != MJ_OK) return r;
  mj_status s{};
  s.job = g.job;
  s.num_nodes = static_cast<int>(env_int("MJ_JOB_NUM_NODES", 1, INT_MAX).value_or(1));
  s.old_num_nodes = s.num_nodes;
  s.restart_count = static_cast<int>(env_int("MJ_RESTART_COUNT", 0, INT_MAX).value_or(0));
  s.kind = MJ_NEW;
  if (auto ord = env_int("MJ_RESUMED_ORDER", 1, INT64_MAX)) {
    s.kind = MJ_RESUMED;
    s.order = *ord;
    s.old_num_nodes = static_cast<int>(env_int("MJ_OLD_NUM_NODES", 1, INT_MAX).value_or(s.num_nodes));
    // the order this relaunch completes is not new for this process
    if (int r = absorb(); r != MJ_OK) return r;
    if (g.order && g.order->id == *ord) g.order->begun = true;
  } else if (const char* j = std::getenv("MJ_JOINING"); j && std::strcmp(j, "1") == 0) {
    s.kind = MJ_JOINING;
  }
  const char* nl = std::getenv("MJ_JOB_NODELIST");
  if (nl && *nl) g.nodelist = nl;
  s.nodelist = g.nodelist.c_str();
  s.node = g.node.c_str();
  g.status = s;
  g.initialised = true;
  *st = s;
  return MJ_OK;
}

int mj_register(void) {
  if (!g.initialised) return fail(MJ_ERR_STATE, "mj_init_adapt was not called");
  if (g.deregistered) return fail(MJ_ERR_STATE, "the job deregistered; it cannot register again");
  json rep;
  int r = request({{"op", "mj_register"}}, &rep);
  if (r == MJ_ERR_REFUSED && g.last_error.find("deregistered") != std::string::npos) return MJ_ERR_STATE;
  if (r == MJ_OK) g.registered = true;
  return r;
}

int mj_deregister(void) {
  if (!g.initialised) return fail(MJ_ERR_STATE, "mj_init_adapt was not called");
  int r = request({{"op", "mj_deregister"}}, nullptr);
  if (r == MJ_OK) {
    g.deregistered = true;
    if (g.order) kill_launched(*g.order);
    settle_order();
  }
  return r;
}

int mj_probe_adapt(int* pending, mj_role* role, mj_order* order) { return probe(0, pending, role, order); }

int mj_wait_adapt(double timeout_s, int* pending, mj_role* role, mj_order* order) {
  if (std::isnan(timeout_s) || timeout_s >= 1e7)  // NaN would reach the int conversion below
    return fail(MJ_ERR_ARG, "timeout_s must be below 1e7 seconds (negative: wait forever)");
  int ms = timeout_s < 0 ? -1 : static_cast<int>(std::ceil(timeout_s * 1000));
  return probe(ms, pending, role, order);
}

int mj_adapt_begin(const mj_order* order, int flags) {
  if (!order || order->id <= 0) return fail(MJ_ERR_ARG, "no order");
  if (!g.initialised) return fail(MJ_ERR_STATE, "mj_init_adapt was not called");
  if ((flags & ~MJ_ADAPT_RESTART) != 0) return fail(MJ_ERR_ARG, "unknown flags");
  if (!g.order || g.order->id != order->id) return fail(MJ_ERR_STATE, "order " + std::to_string(order->id) + " is not pending");
  json rep;
  int r = request({{"op", "mj_begin"}, {"order", order->id}, {"restart", (flags & MJ_ADAPT_RESTART) != 0}}, &rep);
  if (r == MJ_OK) {
    g.order->begun = true;
    if (rep.contains("deadline") && rep["deadline"].is_number()) g.order->deadline = rep["deadline"];
  } else if (r == MJ_ERR_REFUSED && g.last_error.find("rolled back") != std::string::npos) {
    settle_order();
    return MJ_ERR_ROLLED_BACK;
  }
  return r;
}

int mj_adapt_commit(int64_t order_id, const char* const* released, int nreleased) {
  if (order_id <= 0) return fail(MJ_ERR_ARG, "no order");
  if (nreleased < 0 || nreleased > MJ_MAX_ORDER_NODES || (nreleased > 0 && !released))
    return fail(MJ_ERR_ARG, "bad released list");
  if (!g.initialised) return fail(MJ_ERR_STATE, "mj_init_adapt was not called");
  json body = {{"op", "mj_commit"}, {"order", order_id}};
  if (nreleased > 0) {
    json rel = json::array();
    for (int i = 0; i < nreleased; ++i) {
      if (!released[i]) return fail(MJ_ERR_ARG, "a released node name is NULL");
      rel.push_back(released[i]);
    }
    body["released"] = rel;
  }
  auto settle = [&](int r) {
    if (g.order && g.order->id == order_id) {
      if (r == MJ_ERR_ROLLED_BACK) kill_launched(*g.order);
      if (r == MJ_OK || r == MJ_ERR_ROLLED_BACK) settle_order();
    }
    return r;
  };
  json rep;
  int r = request(body, &rep);
  if (r != MJ_ERR_CONNECT) {
    if (r == MJ_OK && rep.contains("nodelist") && rep["nodelist"].is_string()) g.nodelist = rep["nodelist"];
    return settle(r);
  }
  // The connection dropped: the commit may or may not have landed. Ask the
  // state file (through the scheduler, once it is back) what happened.
  auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(kReconnectS);
  while (std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (connect_and_hello() != MJ_OK) continue;
    json st;
    int q = request({{"op", "mj_status"}, {"order", order_id}}, &st);
    if (q == MJ_ERR_CONNECT) continue;
    if (q != MJ_OK) return settle(q);
    std::string s = st.value("state", "");
    if (s == "committed") return settle(MJ_OK);
    if (s == "rolled_back") {
      g.last_error = "order rolled back: " + st.value("reason", std::string());
      return settle(MJ_ERR_ROLLED_BACK);
    }
    r = request(body, &rep);  // still outstanding: commit again
    if (r != MJ_ERR_CONNECT) return settle(r);
  }
  return fail(MJ_ERR_CONNECT, "lost the scheduler during the commit of order " + std::to_string(order_id));
}

namespace {
/// The calling thread's seconds on a CPU and waiting on a run queue
/// (/proc/thread-self/schedstat, Linux with CONFIG_SCHED_INFO; the wait
/// includes time held off by a cgroup CPU quota); false when unreadable.
bool thread_schedstat(double* cpu_s, double* delay_s) {
  int fd = ::open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char b[128];
  ssize_t n = ::read(fd, b, sizeof b - 1);
  ::close(fd);
  if (n <= 0) return false;
  b[n] = 0;
  unsigned long long on = 0, wait = 0;
  if (std::sscanf(b, "%llu %llu", &on, &wait) != 2) return false;
  *cpu_s = static_cast<double>(on) * 1e-9;
  *delay_s = static_cast<double>(wait) * 1e-9;
  return true;
}
}  // namespace

int mj_report_perf(double mpi_s, double compute_s) {
  if (!std::isfinite(mpi_s) || !std::isfinite(compute_s) || mpi_s < 0 || compute_s < 0 || mpi_s + compute_s <= 0 ||
      mpi_s > 1e9 || compute_s > 1e9)
    return fail(MJ_ERR_ARG, "mpi_s and compute_s must be finite, >= 0, with a positive sum");
  json body = {{"op", "mj_perf"}, {"mpi_s", mpi_s}, {"compute_s", compute_s}};
  if (int r = ensure_env(); r != MJ_OK) return r;
  if (!g.node.empty()) body["node"] = g.node;  // where this rank runs: the slow-node detector's attribution
  // The thread's CPU time and run-queue wait since its previous report: how
  // much of the CPU its node gave it (a rank held off the CPU inside MPI looks
  // like one waiting for the others by its compute share alone).
  thread_local double last_cpu = -1, last_delay = -1;
  double cpu = 0, delay = 0;
  if (thread_schedstat(&cpu, &delay)) {
    if (last_cpu >= 0 && cpu >= last_cpu && delay >= last_delay && cpu - last_cpu <= 1e9 && delay - last_delay <= 1e9) {
      body["cpu_s"] = cpu - last_cpu;
      body["delay_s"] = delay - last_delay;
    }
    last_cpu = cpu, last_delay = delay;
  }
  return request(body, nullptr);
}

int mj_report_progress(double fraction) {
  if (!std::isfinite(fraction) || fraction < 0 || fraction > 1) return fail(MJ_ERR_ARG, "fraction must be in [0, 1]");
  return request({{"op", "mj_progress"}, {"fraction", fraction}}, nullptr);
}

int mj_launch(const char* node, char* const argv[], pid_t* pid) {
  if (!node || !*node || !argv || !argv[0] || !pid) return fail(MJ_ERR_ARG, "node, argv and pid are needed");
  if (int r = ensure_env(); r != MJ_OK) return r;
  const char* launcher = std::getenv("MJ_LAUNCHER");
  bool srun = launcher && std::strcmp(launcher, "srun") == 0;
  std::vector<std::string> args;
  if (srun) args = {"srun", "-N1", "-n1", "-w", node, "--"};
  for (int i = 0; argv[i]; ++i) args.push_back(argv[i]);
  std::vector<char*> av;
  for (auto& a : args) av.push_back(a.data());
  av.push_back(nullptr);
  int ex[2];
  if (::pipe2(ex, O_CLOEXEC) != 0) return fail(MJ_ERR_LAUNCH, std::string("pipe: ") + std::strerror(errno));
  pid_t p = ::fork();
  if (p < 0) {
    ::close(ex[0]);
    ::close(ex[1]);
    return fail(MJ_ERR_LAUNCH, std::string("fork: ") + std::strerror(errno));
  }
  if (p == 0) {
    ::close(ex[0]);
    ::setenv("MJ_NODE", node, 1);
    ::setenv("MJ_JOINING", "1", 1);
    ::unsetenv("MJ_RESUMED_ORDER");
    ::execvp(av[0], av.data());
    int e = errno;
    (void)!::write(ex[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(ex[1]);
  int e = 0;
  ssize_t n;
  while ((n = ::read(ex[0], &e, sizeof e)) < 0 && errno == EINTR) {
  }
  ::close(ex[0]);
  if (n == static_cast<ssize_t>(sizeof e)) {
    ::waitpid(p, nullptr, 0);
    return fail(MJ_ERR_LAUNCH, std::string("cannot run ") + av[0] + ": " + std::strerror(e));
  }
  if (g.order && g.order->begun && g.order->kind == MJ_ORDER_EXPAND) g.order->launched.push_back(p);
  *pid = p;
  return MJ_OK;
}

int mj_finalize(void) {
  drop_connection();
  g.initialised = false;
  g.order.reset();
  g.settled.reset();
  g.pushed.clear();
  return MJ_OK;
}

const char* mj_strerror(int err) {
  switch (err) {
    case MJ_OK: return "success";
    case MJ_ERR_ENV: return "not inside a dynres job (MJ_JOB_ID, MJ_SECRET, MJ_SOCKET)";
    case MJ_ERR_CONNECT: return "the scheduler cannot be reached";
    case MJ_ERR_AUTH: return "the scheduler refused this process's identity";
    case MJ_ERR_REFUSED: return "the scheduler refused the request";
    case MJ_ERR_STATE: return "call out of order";
    case MJ_ERR_ROLLED_BACK: return "the order was rolled back";
    case MJ_ERR_PROTO: return "malformed message from the scheduler";
    case MJ_ERR_ARG: return "bad argument";
    case MJ_ERR_NOMEM: return "out of memory";
    case MJ_ERR_LAUNCH: return "cannot launch the process";
  }
  return "unknown error";
}

const char* mj_last_error(void) { return g.last_error.c_str(); }

}  // extern "C"
