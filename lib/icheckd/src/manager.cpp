#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <list>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "dynres/icheck/config.hpp"
#include "dynres/icheck/daemon.hpp"
#include "dynres/icheck/policy.hpp"
#include "dynres/icheck/wire.hpp"

namespace fs = std::filesystem;

namespace dynres::icheck {

namespace {
double wall() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
double mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string k;
  double v;
  std::string unit;
  while (f >> k >> v >> unit)
    if (k == "MemAvailable:") return v * 1024;
  return 0;
}
std::string hostname() {
  char h[256] = {0};
  ::gethostname(h, sizeof h - 1);
  return h;
}

struct AgentProc {
  std::string id, app, address;
  pid_t pid = 0;
  bool alive = true;
  long long ncops_reported = 0;
  json last;
};

/// The IPv4 address this host's name resolves to (the node's address for
/// `--listen auto`, e.g. a manager started on its node with srun); 127.0.0.1
/// when the name does not resolve.
std::string host_address() {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  std::string out = "127.0.0.1";
  if (::getaddrinfo(hostname().c_str(), nullptr, &hints, &res) == 0 && res) {
    char buf[INET_ADDRSTRLEN] = {0};
    auto* sin = reinterpret_cast<sockaddr_in*>(res->ai_addr);
    if (::inet_ntop(AF_INET, &sin->sin_addr, buf, sizeof buf)) out = buf;
    ::freeaddrinfo(res);
  }
  return out;
}

class Manager {
 public:
  explicit Manager(const ManagerOptions& o) : opt_(o), cfg_(load_static(o.config)) {
    if (opt_.node.empty()) opt_.node = hostname();
    fs::create_directories(cfg_.run_dir);
    fs::permissions(cfg_.run_dir, fs::perms::owner_all, fs::perm_options::replace);
    if (opt_.listen.empty()) opt_.listen = "unix:" + (fs::path(cfg_.run_dir) / ("manager-" + opt_.node + ".sock")).string();
    if (opt_.listen == "auto") opt_.listen = host_address() + ":0";
    if (opt_.agent_bin.empty()) {
      std::error_code ec;
      auto self = fs::read_symlink("/proc/self/exe", ec);
      opt_.agent_bin = ec ? "icagent" : (self.parent_path() / "icagent").string();
    }
  }

  int run(std::atomic<bool>* stop) {
    require_safe_tcp_auth(opt_.listen);
    const bool on_path = is_unix_address(opt_.listen);
    if (on_path) claim_socket_path();
    Socket l = listen_on(opt_.listen);
    addr_ = bound_address(l, opt_.listen);
    struct stat sb {};
    if (on_path && ::stat(addr_.substr(5).c_str(), &sb) == 0) sock_dev_ = sb.st_dev, sock_ino_ = sb.st_ino;
    std::printf("READY %s\n", addr_.c_str());
    std::fflush(stdout);
    std::thread hb([&] { heartbeat_loop(stop); });
    // Each connection is authenticated and served on its own thread (a slow
    // or silent peer stalls nobody), at most kMaxPerPeer at once per TCP
    // peer host; run() waits for them before returning (they use `this`).
    std::atomic<int> active{0};
    std::mutex peers_mu;
    std::map<std::string, int> per_peer;
    while (!*stop) {
      Socket c = accept_unauthenticated(l, 200);
      if (!c.valid()) continue;
      const std::string host = peer_host(c);
      bool over = active >= kMaxConnections;
      if (!over && !host.empty()) {
        std::lock_guard<std::mutex> g(peers_mu);
        if (per_peer[host] >= kMaxPerPeer) over = true;
        else per_peer[host]++;
      }
      if (over) {
        std::fprintf(stderr, "icheckd manager %s: refused a connection from %s: too many connections\n",
                     opt_.node.c_str(), host.empty() ? "a local peer" : host.c_str());
        try { send_msg(c, {{"error", "busy: too many connections to the manager"}}); } catch (...) {}
        continue;
      }
      auto sp = std::make_shared<Socket>(std::move(c));
      active++;
      std::thread([this, sp, host, &active, &peers_mu, &per_peer] {
        if (authenticate_accepted(*sp)) serve(*sp);
        if (!host.empty()) {
          std::lock_guard<std::mutex> g(peers_mu);
          if (--per_peer[host] <= 0) per_peer.erase(host);
        }
        active--;
      }).detach();
    }
    hb.join();
    while (active > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    // A manager that replaced us owns the path now: remove only our own socket file.
    if (on_path && ::stat(addr_.substr(5).c_str(), &sb) == 0 && sb.st_dev == sock_dev_ && sb.st_ino == sock_ino_)
      ::unlink(addr_.substr(5).c_str());
    return 0;
  }

 private:
  /// One request on connection c: read it, check the peer, answer.
  void serve(Socket& c) {
    {
      try {
        json m = recv_msg(c, 10000);
        json r;
        try {
          // Only the service (the controller: root or this manager's uid)
          // commands a manager; -1 = TCP without authentication (loopback only).
          const long pu = peer_uid(c);
          if (pu >= 0 && pu != 0 && pu != long(::geteuid())) {
            std::fprintf(stderr, "icheckd manager %s: refused a request from uid %ld\n", opt_.node.c_str(), pu);
            throw std::runtime_error("perm: only the iCheck controller (uid " + std::to_string(::geteuid()) +
                                     ") may command a manager");
          }
          r = handle(m);
        } catch (const std::exception& e) {
          r = {{"error", e.what()}};
        }
        send_msg(c, r);
      } catch (...) {
      }
    }
  }

  /// §6.5.3: a relaunched manager must not start beside a live one. If some
  /// process answers a ping on this node's socket path within
  /// kPingTimeoutMs, throw (the node is served); a path nobody answers on
  /// (the manager crashed, or is stopped and will learn it is superseded at
  /// its next heartbeat) is taken over by listen_on, which replaces the file.
  void claim_socket_path() {
    const std::string path = opt_.listen.substr(5);
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(path, ec))) return;
    json r;
    std::string why;
    try {
      Socket s = connect_to(opt_.listen, kPingTimeoutMs);
      send_msg(s, {{"op", "ping"}});
      r = recv_msg(s, kPingTimeoutMs);
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (why.empty())
      throw std::runtime_error("manager: node " + opt_.node + " is already served by a live manager on " + opt_.listen +
                               " (pid " + std::to_string(r.value("pid", 0L)) + ", epoch " +
                               std::to_string(r.value("epoch", 0L)) + "); not starting a second one");
    std::fprintf(stderr, "icheckd manager %s: nobody answers on %s (%s): taking the socket over\n", opt_.node.c_str(),
                 path.c_str(), why.c_str());
  }

  json handle(const json& m) {
    std::string op = m.value("op", "");
    if (op == "start") {
      json out = json::array();
      for (auto& idj : m.at("ids")) out.push_back(spawn(idj.get<std::string>(), m));
      return {{"ok", true}, {"agents", out}};
    }
    if (op == "stop") {
      // Agents are stopped concurrently: with flush, agent 0 of a set waits
      // for the other agents' parts before it writes the manifest.
      std::vector<std::string> ids;
      for (auto& idj : m.at("ids")) ids.push_back(idj.get<std::string>());
      std::vector<std::string> errs(ids.size());
      std::vector<std::thread> th;
      for (size_t i = 0; i < ids.size(); ++i)
        th.emplace_back([&, i] { errs[i] = stop_agent(ids[i], m.value("flush", false)); });
      for (auto& t : th) t.join();
      json fe = json::array();
      for (size_t i = 0; i < ids.size(); ++i)
        if (!errs[i].empty()) fe.push_back({{"id", ids[i]}, {"error", errs[i]}});
      return {{"ok", true}, {"flush_errors", fe}};
    }
    if (op == "flush" || op == "retire") {
      // Flush agents `ids` concurrently (agent 0 of a set waits for the
      // others' parts): each must report its newest version durable.
      // "retire" (REMOVE_NODES, [John24 Alg. 9]): fence them, {"on": bool}.
      std::vector<std::pair<std::string, std::string>> targets;  // id, address
      {
        std::lock_guard<std::mutex> g(mu_);
        for (auto& idj : m.at("ids")) {
          auto it = agents_.find(idj.get<std::string>());
          targets.emplace_back(idj.get<std::string>(), it != agents_.end() && it->second.alive ? it->second.address : "");
        }
      }
      const int to = int(std::clamp<int64_t>(m.value("timeout_ms", int64_t(50000)), 1000, 600000));
      std::vector<std::string> errs(targets.size());
      std::vector<std::thread> th;
      for (size_t i = 0; i < targets.size(); ++i)
        th.emplace_back([&, i] {
          if (targets[i].second.empty()) {
            errs[i] = "no such agent running here";
            return;
          }
          try {
            Socket s = connect_to(targets[i].second, 1000);
            if (op == "retire") request(s, {{"op", "retire"}, {"on", m.value("on", true)}}, 10000);
            else request(s, {{"op", "flush"}, {"timeout_ms", to}}, to + 5000);
          } catch (const std::exception& e) {
            errs[i] = e.what();
          }
        });
      for (auto& t : th) t.join();
      json fe = json::array();
      for (size_t i = 0; i < targets.size(); ++i)
        if (!errs[i].empty()) {
          std::fprintf(stderr, "icheckd manager %s: agent %s: %s failed: %s\n", opt_.node.c_str(),
                       targets[i].first.c_str(), op.c_str(), errs[i].c_str());
          fe.push_back({{"id", targets[i].first}, {"error", errs[i]}});
        }
      return {{"ok", true}, {"flush_errors", fe}};
    }
    if (op == "metrics") return metrics();
    if (op == "ping") return {{"ok", true}, {"node", opt_.node}, {"pid", ::getpid()}, {"epoch", epoch_.load()}};
    throw std::runtime_error("invalid: unknown op '" + op + "'");
  }

  json spawn(const std::string& id, const json& m) {
    std::string app = m.at("app");
    std::string sock = "unix:" + (fs::path(cfg_.run_dir) / ("agent-" + id + ".sock")).string();
    if (!is_unix_address(opt_.listen)) sock = address_host(opt_.listen) + ":0";
    std::string ready = (fs::path(cfg_.run_dir) / ("agent-" + id + ".ready")).string();
    fs::remove(ready);
    std::vector<std::string> args = {opt_.agent_bin, "--listen", sock, "--app", app, "--id", id,
                                     "--uid", std::to_string(m.value("uid", 0u)), "--pfs-dir", cfg_.pfs_dir,
                                     "--provider", cfg_.provider, "--pfs-every", std::to_string(m.value("pfs_every", 1)),
                                     "--compress-threshold-mb", std::to_string(m.value("compress_threshold_mb", 1024.0)),
                                     "--keep", std::to_string(m.value("keep", 2)), "--ready-file", ready,
                                     "--exit-with-parent"};
    if (!cfg_.fabric_node.empty()) args.insert(args.end(), {"--fabric-node", cfg_.fabric_node});
    if (!m.value("multi_level", true)) args.push_back("--no-multi-level");
    if (m.contains("max_bytes") && m["max_bytes"].is_number_unsigned())
      args.insert(args.end(), {"--max-bytes", std::to_string(m["max_bytes"].get<uint64_t>())});
    if (opt_.mem_limit_gb > 0) args.insert(args.end(), {"--node-budget-file", budget_file()});
    std::string log = (fs::path(cfg_.run_dir) / ("agent-" + id + ".log")).string();
    pid_t pid = ::fork();
    if (pid == 0) {
      int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
      ::setsid();
      std::vector<char*> av;
      for (auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
      av.push_back(nullptr);
      ::execv(av[0], av.data());
      ::execvp("icagent", av.data());
      ::_exit(127);
    }
    if (pid < 0) throw std::runtime_error("fork failed");
    for (int i = 0; i < 200; ++i) {
      std::ifstream f(ready);
      std::string a;
      if (f >> a) {
        std::lock_guard<std::mutex> g(mu_);
        agents_[id] = {id, app, a, pid, true, 0, json::object()};
        return {{"id", id}, {"address", a}, {"host", hostname()}, {"pid", pid}};
      }
      int st;
      if (::waitpid(pid, &st, WNOHANG) == pid) throw std::runtime_error("icagent exited at start (see " + log + ")");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);  // reaped: no zombie per failed start
    throw std::runtime_error("icagent did not become ready");
  }

  /// Stop agent `id` (with `flush`: it writes its newest version to the
  /// second level first). Returns "" or why the flush failed (logged).
  std::string stop_agent(const std::string& id, bool flush) {
    AgentProc a;
    {
      std::lock_guard<std::mutex> g(mu_);
      auto it = agents_.find(id);
      if (it == agents_.end()) return "";
      a = it->second;
      agents_.erase(it);
    }
    if (!a.alive) return "";
    std::string err;
    try {
      Socket s = connect_to(a.address, 1000);
      request(s, {{"op", "shutdown"}, {"flush", flush}, {"timeout_ms", 50000}}, 60000);
    } catch (const std::exception& e) {
      err = e.what();
      if (flush)
        std::fprintf(stderr, "icheckd manager %s: agent %s: flush at stop failed: %s\n", opt_.node.c_str(), id.c_str(),
                     e.what());
      ::kill(a.pid, SIGTERM);
    }
    reap_or_kill({a.pid}, 2000);
    return flush ? err : "";
  }

  /// Wait up to `ms` milliseconds for the agent processes `pids` (children of
  /// this manager) to exit, then SIGKILL and reap the rest.
  static void reap_or_kill(std::vector<pid_t> pids, int ms) {
    for (int waited = 0; !pids.empty(); waited += 20) {
      std::erase_if(pids, [](pid_t p) { return p <= 0 || ::waitpid(p, nullptr, WNOHANG) != 0; });
      if (pids.empty() || waited >= ms) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (pid_t p : pids) ::kill(p, SIGKILL), ::waitpid(p, nullptr, 0);
  }

  /// run_dir/manager-NODE.budget: the node's checkpoint memory left
  /// (--mem-limit-gb less the agents' pieces), read by its agents before
  /// they take a piece (AgentOptions::node_budget_file).
  std::string budget_file() const { return (fs::path(cfg_.run_dir) / ("manager-" + opt_.node + ".budget")).string(); }
  void write_budget(double left) {
    const std::string f = budget_file(), tmp = f + ".tmp";
    {
      std::ofstream o(tmp, std::ios::trunc);
      o << std::fixed << std::setprecision(0) << left << "\n";
      if (!o) return;
    }
    std::error_code ec;
    fs::rename(tmp, f, ec);  // atomic: an agent reads the old or the new number
  }

  /// §6.3 metrics of this node.
  json metrics() {
    // called by the heartbeat thread and by "metrics" requests: the rate
    // state below (last_t_, ncops_, used_bytes_, ...) is shared
    std::lock_guard<std::mutex> mg(metrics_mu_);
    double now = wall();
    std::vector<double> sizes, times;
    std::vector<long long> new_ops;
    double last_op = 0;
    int n_agents = 0;
    used_bytes_ = 0;
    // The agents are asked concurrently and without mu_: an agent busy
    // with a commit may take up to its 2.5 s limit to answer, and asked
    // one after the other under mu_, a few such agents held up this
    // manager's starts, stops and flushes (they need mu_) for seconds.
    std::vector<std::pair<std::string, std::string>> live;  // id, address
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& [id, a] : agents_)
        if (a.alive) live.emplace_back(id, a.address);
    }
    n_agents = int(live.size());
    std::vector<json> stats(live.size());
    {
      std::vector<std::thread> th;
      for (size_t i = 0; i < live.size(); ++i)
        th.emplace_back([&, i] {
          try {
            Socket s = connect_to(live[i].second, 500);
            stats[i] = request(s, {{"op", "stats"}}, 2000);
          } catch (...) {
          }
        });
      for (auto& t : th) t.join();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      for (size_t i = 0; i < live.size(); ++i) {
        const json& st = stats[i];
        if (!st.is_object()) continue;
        auto it = agents_.find(live[i].first);
        if (it == agents_.end()) continue;  // stopped meanwhile
        long long n = st.value("ncops", 0LL);
        new_ops.push_back(n - it->second.ncops_reported);
        it->second.ncops_reported = n;
        sizes.push_back(st.value("bytes", 0.0));
        times.push_back(st.value("seconds", 0.0));
        last_op = std::max(last_op, st.value("last_op", 0.0));
        used_bytes_ += st.value("mem_bytes", 0.0);
      }
    }
    // the agents' pieces just counted, not those of the previous heartbeat
    // (the controller placed agents and the scaler judged memory by a figure
    // one heartbeat older than the budget file the agents obey)
    double avail = mem_available();
    if (opt_.mem_limit_gb > 0) avail = std::min(avail, opt_.mem_limit_gb * 1e9 - used_bytes_);
    long long ncops = ncops_update(ncops_, new_ops);  // Eq. 6.6
    double dt = last_t_ > 0 ? now - last_t_ : 0;
    json m = {{"avail_mem", avail},
              {"mem_depletion_rate", memory_depletion_rate(last_avail_, avail, dt)},  // Eq. 6.5
              {"ncops", ncops},
              {"ncops_per_min", dt > 0 ? double(ncops - ncops_) * 60.0 / dt : 0.0},
              {"dcop", last_op > 0 && last_op_ > 0 ? cop_interval(last_op_, last_op) : 0.0},  // Eq. 6.7
              {"bandwidth", node_bandwidth(sizes, times)},                                  // Eq. 6.8-6.9
              {"agents", n_agents},
              {"agent_fill", agent_fill_rate(last_agents_, n_agents, dt)},                  // Eq. 6.10
              {"power", power(n_agents)},
              {"power_source", power_src_},
              {"used_bytes", used_bytes_}};
    if (opt_.mem_limit_gb > 0) write_budget(std::max(0.0, opt_.mem_limit_gb * 1e9 - used_bytes_));
    ncops_ = ncops;
    last_t_ = now;
    last_avail_ = avail;
    last_agents_ = n_agents;
    if (last_op > 0) last_op_ = last_op;
    return m;
  }

  /// §6.3.5: RAPL package energy when readable, else a declared model
  /// (71 W idle + 5 W per active agent), labelled "modelled".
  double power(int agents) {
    std::ifstream f("/sys/class/powercap/intel-rapl:0/energy_uj");
    double uj;
    if (f >> uj) {
      double now = wall();
      double p = (rapl_t_ > 0 && now > rapl_t_ && uj >= rapl_uj_) ? (uj - rapl_uj_) / 1e6 / (now - rapl_t_) : 0;
      rapl_uj_ = uj, rapl_t_ = now;
      power_src_ = "rapl";
      return p;
    }
    power_src_ = "modelled";
    return 71.0 + 5.0 * agents;
  }

  /// The heartbeat thread only reaps agents and talks to the controller:
  /// the §6.3 metrics are gathered on their own thread (metrics_loop) and
  /// a heartbeat carries the newest ones, agents the controller gave up are
  /// stopped on threads of their own, and heartbeats leave at a fixed rate
  /// (one interval after the previous one was due, not after it was done).
  /// Before, each heartbeat first asked every agent for its statistics (up
  /// to 2.5 s each, one after the other) and a stop waited up to 60 s for
  /// the agent, then the thread slept a whole interval: with several busy
  /// agents on a loaded node the controller's window (heartbeat_interval x
  /// heartbeat_misses) passed and the node was declared lost with every
  /// agent's versions.
  void metrics_loop(std::atomic<bool>* stop) {
    while (!*stop) {
      json m = metrics();
      {
        std::lock_guard<std::mutex> g(last_metrics_mu_);
        last_metrics_ = std::move(m);
      }
      for (int i = 0; i < int(cfg_.heartbeat_interval * 10) && !*stop; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  void heartbeat_loop(std::atomic<bool>* stop) {
    size_t cur = 0;
    {
      json m = metrics();  // the first heartbeat already carries them (placement reads avail_mem)
      std::lock_guard<std::mutex> g(last_metrics_mu_);
      last_metrics_ = std::move(m);
    }
    std::thread mt([&] { metrics_loop(stop); });
    struct Stopper {
      std::thread t;
      std::shared_ptr<std::atomic<bool>> done;
    };
    std::list<Stopper> stoppers;
    const auto period = std::chrono::milliseconds(std::max(1, int(cfg_.heartbeat_interval * 1000)));
    auto due = std::chrono::steady_clock::now();
    while (!*stop) {
      due += period;
      for (auto it = stoppers.begin(); it != stoppers.end();)
        if (*it->done) it->t.join(), it = stoppers.erase(it);
        else ++it;
      std::vector<std::string> dead, live;
      {
        std::lock_guard<std::mutex> g(mu_);
        for (auto& [id, a] : agents_) {
          int st;
          if (a.alive && a.pid > 0 && ::waitpid(a.pid, &st, WNOHANG) == a.pid) {
            a.alive = false;
            dead.push_back(id);
          } else if (a.alive) {
            live.push_back(id);
          }
        }
      }
      // epoch 0 = "register me": the controller answers with this manager's
      // incarnation number; a newer one on the same node supersedes us (§6.5.2).
      json msg = {{"op", "heartbeat"}, {"node", opt_.node}, {"address", addr_}, {"metrics", latest_metrics()},
                  {"dead_agents", dead}, {"agents", live}, {"epoch", epoch_.load()}, {"pid", ::getpid()}, {"host", hostname()}};
      bool sent = false;
      for (size_t k = 0; k < cfg_.controllers.size() && !sent && !*stop; ++k) {
        size_t i = (cur + k) % cfg_.controllers.size();
        try {
          Socket s = connect_to(cfg_.controllers[i], 1000);
          send_msg(s, msg);
          json r = recv_msg(s, 5000);
          if (r.value("superseded", false)) {
            std::fprintf(stderr, "icheckd manager %s (pid %d): %s; stopping this manager and its agents\n",
                         opt_.node.c_str(), int(::getpid()), r.value("error", "superseded").c_str());
            *stop = true;
            break;
          }
          if (r.contains("error")) throw WireError(r["error"].get<std::string>());
          int64_t e = r.value("epoch", int64_t(0));
          if (e > 0 && e != epoch_) {
            std::fprintf(stderr, "icheckd manager %s (pid %d): registered with the controller, epoch %lld\n",
                         opt_.node.c_str(), int(::getpid()), (long long)e);
            epoch_ = e;
          }
          sent = true;
          cur = i;
          // agents the controller declared lost meanwhile: stop them
          for (auto& id : r.value("stop_agents", json::array()))
            if (id.is_string()) {
              std::fprintf(stderr, "icheckd manager %s: stopping agent %s (the controller no longer uses it)\n",
                           opt_.node.c_str(), id.get<std::string>().c_str());
              auto done = std::make_shared<std::atomic<bool>>(false);
              stoppers.push_back({std::thread([this, done, aid = id.get<std::string>()] {
                                    stop_agent(aid, false);
                                    *done = true;
                                  }),
                                  done});
            }
        } catch (...) {
        }
      }
      if (!sent && !dead.empty()) {  // report later
        std::lock_guard<std::mutex> g(mu_);
        for (auto& d : dead) agents_[d].alive = true, agents_[d].pid = -1;
      }
      // a heartbeat that took longer than the period: the next one leaves now
      due = std::max(due, std::chrono::steady_clock::now());
      while (!*stop && std::chrono::steady_clock::now() < due)
        std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
            std::chrono::milliseconds(100), due - std::chrono::steady_clock::now()));
    }
    mt.join();
    for (auto& st : stoppers) st.t.join();
    // stopping the manager (icheck-down, or superseded) stops its agents: no agent outlives it
    std::vector<pid_t> pids;
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto& [id, a] : agents_)
        if (a.alive && a.pid > 0 && ::kill(a.pid, SIGTERM) == 0) pids.push_back(a.pid);
    }
    reap_or_kill(pids, 2000);
  }

  ManagerOptions opt_;
  StaticConfig cfg_;
  std::string addr_;
  std::mutex mu_;
  std::mutex metrics_mu_;  ///< serialises metrics() (taken before mu_)
  std::mutex last_metrics_mu_;
  json last_metrics_ = json::object();  ///< newest metrics() of metrics_loop, sent with each heartbeat
  json latest_metrics() {
    std::lock_guard<std::mutex> g(last_metrics_mu_);
    return last_metrics_;
  }
  std::map<std::string, AgentProc> agents_;
  long long ncops_ = 0;
  double last_t_ = 0, last_avail_ = 0, last_op_ = 0, used_bytes_ = 0, rapl_uj_ = 0, rapl_t_ = 0;
  int last_agents_ = 0;
  std::string power_src_ = "modelled";
  std::atomic<int64_t> epoch_{0};   ///< incarnation given by the controller (0 = not registered yet)
  dev_t sock_dev_ = 0;              ///< identity of our socket file, so that we never
  ino_t sock_ino_ = 0;              ///< unlink a successor's
  static constexpr int kPingTimeoutMs = 1000;
  static constexpr int kMaxConnections = 128;  ///< connections served at once
  static constexpr int kMaxPerPeer = 16;       ///< of them from one TCP peer host
};
}  // namespace

int run_manager(const ManagerOptions& o, std::atomic<bool>* stop) {
  Manager m(o);
  return m.run(stop);
}

}  // namespace dynres::icheck
