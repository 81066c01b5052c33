// The client requests of dynres/requests.hpp: one dispatcher, one place that
// decides who may do what (Authority), the handlers, and the client side.
#include "dynres/requests.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "dynres/corridor.hpp"
#include "dynres/hostlist.hpp"
#include "dynres/jobsel.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/launch.hpp"
#include "dynres/paths.hpp"
#include "dynres/proto.hpp"
#include "dynres/schedd.hpp"

namespace dynres::schedd {

// ------------------------------------------------------------ identity

std::optional<Peer> peer_of(int fd) {
  ucred cr{};
  socklen_t len = sizeof cr;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 || len != sizeof cr) return std::nullopt;
  return Peer{static_cast<uint32_t>(cr.uid), static_cast<uint32_t>(cr.gid), cr.pid};
}

Peer self_peer() { return {static_cast<uint32_t>(::getuid()), static_cast<uint32_t>(::getgid()), ::getpid()}; }

std::string Authority::may_submit(const Peer& p) const {
  if (owner == 0 || p.uid == owner) return "";
  return "Access/permission denied: this cluster's scheduler runs as user " + user_name(owner) +
         " and runs jobs only as that user, not as " + user_name(p.uid) +
         " (a cluster shared by several users runs its daemons as root)";
}

// ------------------------------------------------------------ bytes

namespace {
const char* const kB64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

bool valid_utf8(const std::string& s) {
  try {
    (void)json(s).dump();
    return true;
  } catch (const json::exception&) {
    return false;
  }
}
}  // namespace

json encode_bytes(const std::string& s) {
  if (valid_utf8(s)) return s;
  std::string out;
  out.reserve((s.size() + 2) / 3 * 4);
  for (size_t i = 0; i < s.size(); i += 3) {
    uint32_t v = static_cast<unsigned char>(s[i]) << 16;
    if (i + 1 < s.size()) v |= static_cast<unsigned char>(s[i + 1]) << 8;
    if (i + 2 < s.size()) v |= static_cast<unsigned char>(s[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += i + 1 < s.size() ? kB64[(v >> 6) & 63] : '=';
    out += i + 2 < s.size() ? kB64[v & 63] : '=';
  }
  return json{{"base64", out}};
}

std::string decode_bytes(const json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (!j.is_object() || j.size() != 1 || !j.contains("base64") || !j["base64"].is_string())
    throw std::invalid_argument("expected a string or {\"base64\": ...}");
  const std::string& in = j["base64"].get_ref<const std::string&>();
  if (in.size() % 4) throw std::invalid_argument("bad base64 length");
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      char c = in[i + k];
      const char* p = c == '=' ? nullptr : std::strchr(kB64, c);
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (!p || !c || pad) throw std::invalid_argument("bad base64 character");
      v = (v << 6) | static_cast<uint32_t>(p - kB64);
    }
    out += static_cast<char>((v >> 16) & 255);
    if (pad < 2) out += static_cast<char>((v >> 8) & 255);
    if (pad < 1) out += static_cast<char>(v & 255);
  }
  return out;
}

// ------------------------------------------------------------ handlers

namespace {

using Reply = json;

/// A malformed request (a client that is not one of ours): named, refused.
struct BadRequest : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

Reply done(int rc, const std::string& out, const std::string& err) { return {{"rc", rc}, {"out", out}, {"err", err}}; }

// Typed members with bounds: every value from the socket is checked.
const json& member(const json& r, const char* k) {
  static const json null;
  auto it = r.find(k);
  return it == r.end() ? null : *it;
}
std::string str(const json& r, const char* k, size_t max_bytes, bool bytes = false) {
  const json& v = member(r, k);
  if (v.is_null()) return "";
  std::string s;
  try {
    s = bytes ? decode_bytes(v) : v.is_string() ? v.get<std::string>() : throw std::invalid_argument("not a string");
  } catch (const std::invalid_argument& e) {
    throw BadRequest(std::string("'") + k + "': " + e.what());
  }
  if (s.size() > max_bytes) throw BadRequest(std::string("'") + k + "' is longer than " + std::to_string(max_bytes) + " bytes");
  return s;
}
int64_t integer(const json& r, const char* k, int64_t lo, int64_t hi, int64_t def) {
  const json& v = member(r, k);
  if (v.is_null()) return def;
  if (!v.is_number_integer()) throw BadRequest(std::string("'") + k + "' must be an integer");
  int64_t x = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : v.get<int64_t>();
  if (x < lo || x > hi)
    throw BadRequest(std::string("'") + k + "' must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}
bool flag(const json& r, const char* k) {
  const json& v = member(r, k);
  if (v.is_null()) return false;
  if (!v.is_boolean()) throw BadRequest(std::string("'") + k + "' must be true or false");
  return v.get<bool>();
}
std::vector<std::string> strings(const json& r, const char* k, size_t max_items, size_t max_bytes, bool bytes = false) {
  const json& v = member(r, k);
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_array() || v.size() > max_items)
    throw BadRequest(std::string("'") + k + "' must be a list of at most " + std::to_string(max_items) + " strings");
  size_t total = 0;
  for (auto& e : v) {
    json wrap = {{"x", e}};
    out.push_back(str(wrap, "x", max_bytes, bytes));
    total += out.back().size();
  }
  if (total > max_bytes) throw BadRequest(std::string("'") + k + "' holds more than " + std::to_string(max_bytes) + " bytes");
  return out;
}
double finite(const json& r, const char* k) {
  const json& v = member(r, k);
  if (!v.is_number() || !std::isfinite(v.get<double>())) throw BadRequest(std::string("'") + k + "' must be a finite number");
  return v.get<double>();
}

// ---- submit (mjsub) -------------------------------------------------------
Reply handle_submit(Ctx& ctx, const Peer& peer, const json& r) {
  SubmitRequest req;
  req.home = ctx.home;
  req.gathered = true;
  req.script_text = str(r, "script", kMaxScriptBytes, true);
  req.script_path = str(r, "script_path", 4096, true);
  req.default_name = str(r, "default_name", 4096, true);
  req.cwd = str(r, "cwd", 4096, true);
  req.environment = strings(r, "environment", kMaxEnvironmentVars, kMaxEnvironmentBytes, true);
  req.args = strings(r, "args", 100000, kMaxEnvironmentBytes, true);
  req.umask = static_cast<int>(integer(r, "umask", 0, 0777, 022));
  const json& opts = member(r, "options");
  if (!opts.is_null()) {
    if (!opts.is_array() || opts.size() > 1000) throw BadRequest("'options' must be a list of at most 1000 [name, value]");
    for (auto& o : opts) {
      if (!o.is_array() || o.size() != 2 || !o[0].is_string() || o[0].get_ref<const std::string&>().size() > 64)
        throw BadRequest("'options' must hold [name, value] pairs");
      json wrap = {{"v", o[1]}};
      req.options.push_back({o[0].get<std::string>(), str(wrap, "v", kMaxScriptBytes, true)});
    }
  }
  if (req.cwd.empty() || req.cwd[0] != '/') throw BadRequest("'cwd' must be an absolute directory");
  if (auto why = ctx.auth.may_submit(peer); !why.empty()) return done(1, "", "mjsub: error: " + why + "\n");
  std::vector<int> tasks;
  JobRecord j;
  SubmitNotes notes;  // sbatch's warnings and #SBATCH --wait, for the client to act on
  try {
    j = prepare_job(req, ctx.st, &tasks, &notes);
  } catch (const SpecError& e) {
    return done(1, "", std::string("mjsub: error: ") + e.what() + "\n");
  }
  j.uid = peer.uid;  // the kernel's word, never the message's
  j.gid = peer.gid;
  if (flag(r, "test_only")) {
    auto at = test_only_start(ctx.st, j, ctx.cfg.policy);
    return {{"rc", 0},
            {"warnings", notes.warnings},
            {"test_only", true},
            {"start", at ? json(*at) : json(nullptr)},
            {"nodes", j.req_nodes},
            {"policy", sched::to_string(ctx.cfg.policy.policy)}};
  }
  int64_t id = tasks.empty() ? ctx.st.submit(j) : ctx.st.submit_array(j, tasks, j.array_max).front();
  ctx.wake = true;
  return {{"rc", 0}, {"job", job_to_json(*ctx.st.job(id))}, {"warnings", notes.warnings}, {"wait", notes.wait}};
}

// ---- cancel / signal (mjcancel) -------------------------------------------
Reply handle_cancel(Ctx& ctx, const Peer& peer, const json& r) {
  State& st = ctx.st;
  JobFilter f;
  for (auto& n : strings(r, "names", 10000, 1 << 20)) f.names.insert(n);
  for (auto& s : strings(r, "states", 16, 1024)) {
    if (s != kPending && s != kRunning) throw BadRequest("'states': only PENDING or RUNNING");
    f.states.insert(s);
  }
  const json& uids = member(r, "uids");
  if (!uids.is_null()) {
    if (!uids.is_array() || uids.size() > 10000) throw BadRequest("'uids' must be a list of uids");
    for (auto& u : uids) {
      if (!u.is_number_integer() || u.get<int64_t>() < 0 || u.get<int64_t>() > 0xffffffffLL)
        throw BadRequest("'uids' must hold uids");
      f.uids.insert(u.get<int64_t>());
    }
  }
  const int sig = static_cast<int>(integer(r, "signal", 0, 64, 0));
  const bool quiet = flag(r, "quiet");
  std::ostringstream err;
  int rc = 0;
  std::vector<int64_t> ids;
  try {
    for (auto& a : strings(r, "ids", 10000, 1 << 20))
      for (auto id : resolve_job_refs(st, a)) ids.push_back(id);
  } catch (const std::invalid_argument& e) {
    return done(1, "", std::string("mjcancel: error: ") + e.what() + "\n");
  }
  std::vector<int64_t> targets;
  if (ids.empty()) {  // every active job matching the filter, as scancel
    if (f.names.empty() && f.states.empty() && f.uids.empty()) throw BadRequest("no job ids and no filter");
    if (f.states.empty()) f.states = sig ? std::set<std::string>{kRunning} : std::set<std::string>{kPending, kRunning};
    for (auto& j : select_jobs(st, f)) targets.push_back(j.id);  // another user's: refused one by one below
  } else {
    for (auto id : ids) {
      auto j = st.job(id);
      if (j && !(f.names.empty() && f.uids.empty() && f.states.empty()) && !f.matches(*j)) continue;
      targets.push_back(id);
    }
  }
  for (auto id : targets) {
    auto j = st.job(id);
    if (!j) {
      err << "mjcancel: error: invalid job id " << id << "\n";
      rc = 1;
      continue;
    }
    if (!ctx.auth.may_act_on(peer, j->uid)) {
      // as scancel: "Kill job error on job id N: Access/permission denied", exit 1
      err << "mjcancel: error: Kill job error on job id " << id << ": Access/permission denied (job of user "
          << user_name(j->uid) << ")\n";
      rc = 1;
      continue;
    }
    // authorised above: the launch functions act with root's rights here
    if (sig) {
      switch (launch::signal_job(st, id, 0, sig)) {
        case launch::SignalResult::signalled:
          break;
        case launch::SignalResult::not_running:
          err << "mjcancel: error: job " << id << " is not running (" << st.job(id)->state << "): not signalled\n";
          rc = 1;
          break;
        case launch::SignalResult::not_found:
        case launch::SignalResult::not_owner:
          err << "mjcancel: error: invalid job id " << id << "\n";
          rc = 1;
          break;
      }
      continue;
    }
    switch (launch::cancel_job(st, ctx.home, id, 0)) {
      case launch::CancelResult::cancelled_pending:
      case launch::CancelResult::signalled_running:
        ctx.wake = true;
        break;
      case launch::CancelResult::already_finished:
        if (!quiet) err << "mjcancel: job " << id << " has already ended (" << st.job(id)->state << ")\n";
        break;
      case launch::CancelResult::not_found:
      case launch::CancelResult::not_owner:
        err << "mjcancel: error: invalid job id " << id << "\n";
        rc = 1;
        break;
    }
  }
  return done(rc, "", err.str());
}

// ---- hold / release (mjcontrol) -------------------------------------------
// All or nothing: every job is checked first; if one cannot be held (or
// released), none is changed and the reply names each problem.
Reply handle_hold(Ctx& ctx, const Peer& peer, const json& r, bool hold) {
  std::vector<int64_t> ids;
  try {
    ids = parse_id_list(str(r, "ids", 1 << 20));
  } catch (const std::invalid_argument& e) {
    return done(1, "", std::string("mjcontrol: error: ") + e.what() + "\n");
  }
  if (ids.size() > 100000) throw BadRequest("too many job ids");
  const char* verb = hold ? "held" : "released";
  std::ostringstream err;
  std::vector<int64_t> ok;
  for (auto id : ids) {
    auto j = ctx.st.job(id);
    if (!j) err << "mjcontrol: error: invalid job id " << id << "\n";
    else if (!ctx.auth.may_act_on(peer, j->uid))
      err << "mjcontrol: error: job " << id << ": Access/permission denied (job of user " << user_name(j->uid) << ")\n";
    else if (j->state != kPending)
      err << "mjcontrol: error: job " << id << " is not pending (" << j->state << "): not " << verb << "\n";
    else ok.push_back(id);
  }
  if (ok.size() != ids.size()) {
    if (ids.size() > 1) err << "mjcontrol: error: no job was " << verb << "\n";
    return done(1, "", err.str());
  }
  int rc = 0;
  for (auto id : ids) {
    if (!ctx.st.set_held(id, hold, now_seconds())) {  // it started meanwhile
      auto j = ctx.st.job(id);
      err << "mjcontrol: error: job " << id << " is not pending (" << (j ? j->state : "?") << "): not " << verb << "\n";
      rc = 1;
    }
  }
  if (!hold) ctx.wake = true;
  return done(rc, "", err.str());
}

// ---- update node cpus=N (mjcontrol) — admin only ---------------------------------
Reply handle_node_cpus(Ctx& ctx, const Peer& peer, const json& r) {
  if (!ctx.auth.is_admin(peer))
    return done(1, "", "mjcontrol: error: update node: Access/permission denied (only the cluster's owner, " +
                           user_name(ctx.auth.owner) + ", or root)\n");
  auto names = strings(r, "nodes", 1000000, 64 << 20);
  const int cpus = static_cast<int>(integer(r, "cpus", 1, 1000000, 0));
  if (cpus < 1) throw BadRequest("'cpus' is required");
  try {
    int n = ctx.st.set_node_cpus(names, cpus);
    ctx.wake = true;
    return done(0, "mjcontrol: " + std::to_string(n) + " node(s) now have " + std::to_string(cpus) + " CPUs\n", "");
  } catch (const DbError& e) {
    return done(1, "", std::string("mjcontrol: error: update node: ") + e.what() + "\n");
  }
}

// mjcontrol update node NODES realmemory=MB | gres=gpu:N — admin only, as
// slurm.conf's RealMemory and Gres (what sbatch --mem/--gres are checked against)
Reply handle_node_resource(Ctx& ctx, const Peer& peer, const json& r) {
  if (!ctx.auth.is_admin(peer))  // node sizes, as slurm.conf, are the owner's
    return done(1, "", "mjcontrol: error: update node: Access/permission denied (only the cluster's owner, " +
                           user_name(ctx.auth.owner) + ", or root)\n");
  auto names = strings(r, "nodes", 1000000, 64 << 20);
  const std::string what = str(r, "resource", 16);
  if (what != "mem_mb" && what != "gpus") throw BadRequest("'resource' must be mem_mb or gpus");
  const int64_t value = integer(r, "value", 0, what == "gpus" ? 1024 : (int64_t{1} << 40), -1);
  if (value < 0) throw BadRequest("'value' is required");
  try {
    int n = ctx.st.set_node_resource(names, what, value);
    ctx.wake = true;
    return done(0, "mjcontrol: " + std::to_string(n) + " node(s) now have " +
                       (what == "gpus" ? "gres=gpu:" : "realmemory=") + std::to_string(value) + "\n", "");
  } catch (const DbError& e) {
    return done(1, "", std::string("mjcontrol: error: update node: ") + e.what() + "\n");
  }
}

// ---- corridor (pcorridor set) — admin only --------------------------------
Reply handle_corridor_set(Ctx& ctx, const Peer& peer, const json& r) {
  if (!ctx.auth.is_admin(peer))
    return done(1, "", "pcorridor: error: set: Access/permission denied (only the cluster's owner, " +
                           user_name(ctx.auth.owner) + ", or root, may change the corridor)\n");
  power::SetRequest s;
  s.lower = finite(r, "lower");
  s.upper = finite(r, "upper");
  if (!member(r, "at").is_null()) s.at = finite(r, "at");
  s.reason = str(r, "reason", 4096, true);
  s.force = flag(r, "force");
  s.now = now_seconds();
  try {
    auto model = power::load_power_model(config_path(ctx.home));
    auto out = power::set_corridor(ctx.st, model, s);
    if (out.changed) ctx.wake = true;
    return {{"rc", 0}, {"changed", out.changed}, {"out", ""}, {"err", ""}};
  } catch (const power::InputError& e) {
    return done(2, "", std::string("pcorridor: error: ") + e.what() + "\n");
  }
}

using Handler = std::function<Reply(Ctx&, const Peer&, const json&)>;

const std::map<std::string, Handler>& handlers() {
  static const std::map<std::string, Handler> h = {
      {"submit", handle_submit},
      {"cancel", handle_cancel},
      {"hold", [](Ctx& c, const Peer& p, const json& r) { return handle_hold(c, p, r, true); }},
      {"release", [](Ctx& c, const Peer& p, const json& r) { return handle_hold(c, p, r, false); }},
      {"node_cpus", handle_node_cpus},
      {"node_resource", handle_node_resource},
      {"corridor_set", handle_corridor_set},
  };
  return h;
}

}  // namespace

std::optional<json> handle_request(Ctx& ctx, const Peer& peer, const json& req) {
  if (!req.is_object()) return json{{"error", "a request must be a JSON object"}};
  auto op = req.find("op");
  if (op == req.end() || !op->is_string()) return json{{"error", "a request needs an \"op\""}};
  auto it = handlers().find(op->get<std::string>());
  if (it == handlers().end()) return std::nullopt;
  json reply;
  try {
    reply = it->second(ctx, peer, req);
  } catch (const BadRequest& e) {
    reply = {{"error", std::string("malformed ") + op->get<std::string>() + " request: " + e.what()}};
  } catch (const std::exception& e) {
    reply = {{"error", e.what()}};
  }
  // names and paths are the users' bytes: never fail to answer over them
  return json::parse(reply.dump(-1, ' ', false, json::error_handler_t::replace));
}

// ------------------------------------------------------------ client

int print_reply(const std::string& tool, const json& reply) {
  if (reply.contains("error")) {
    std::cerr << tool << ": error: "
              << (reply["error"].is_string() ? reply["error"].get<std::string>() : reply["error"].dump()) << "\n";
    return 1;
  }
  if (reply.contains("out") && reply["out"].is_string()) std::cout << reply["out"].get<std::string>();
  if (reply.contains("err") && reply["err"].is_string()) std::cerr << reply["err"].get<std::string>();
  return reply.contains("rc") && reply["rc"].is_number_integer() ? reply["rc"].get<int>() : 1;
}

json call_scheduler(const std::string& home, const json& req) {
  int fd = proto::connect_unix(sched_socket(home), 2000);
  if (fd >= 0) {
    try {
      proto::send_frame(fd, req);
      // a long policy pass (power ILP) may delay the answer
      auto reply = proto::recv_frame(fd, 120000);
      ::close(fd);
      if (!reply) throw std::runtime_error("mjsched closed the connection without answering (see " + home + "/mjsched.log)");
      return *reply;
    } catch (const proto::ProtoError& e) {
      ::close(fd);
      throw std::runtime_error(std::string("talking to mjsched: ") + e.what());
    }
  }
  // No scheduler: its owner (or root) records the change for its next start.
  const std::string sp = state_path(home);
  struct stat sb {};
  if (::stat(sp.c_str(), &sb) != 0) {
    if (errno == EACCES)
      throw std::runtime_error("cannot reach the cluster in " + home + ": permission denied (the directory is " +
                               "private to its owner)");
    throw std::runtime_error("no cluster in " + home + " (no state file " + sp + "; start one with vcluster-boot)");
  }
  if (::getuid() != 0 && ::getuid() != sb.st_uid)
    throw std::runtime_error("mjsched is not running for " + home + " (ask its owner, " + user_name(sb.st_uid) +
                             ", to start it); nothing was changed");
  State st(sp);
  Ctx ctx{st, home, load_config(config_path(home)), Authority{static_cast<uint32_t>(sb.st_uid)}};
  auto reply = handle_request(ctx, self_peer(), req);
  if (!reply) throw std::runtime_error("unknown request");
  (*reply)["local"] = true;  // recorded here; the scheduler sees it when it starts
  return *reply;
}

}  // namespace dynres::schedd
