// Requests that change a cluster, and who may make them (mjsched(8),
// "REQUESTS"; dynres(7), "SECURITY").
//
// Every change a user tool makes — mjsub, mjcancel, mjcontrol
// hold/release/update, pcorridor set — is a request to mjsched over its Unix
// socket $DYNRES_HOME/mjsched.sock, the way sbatch and scancel talk to
// slurmctld. The daemon learns who asks from the kernel (SO_PEERCRED), never
// from the message, and decides in one place (Authority) whether the peer may
// do it. The same handlers run in the tool itself only when no scheduler is
// running and the caller owns the state file or is root: the job then waits
// for the scheduler's next start, so nothing submitted is lost; any other
// user gets "mjsched is not running" and nothing changes.
//
// Wire format (frames of dynres/proto.hpp): a request {"op": OP, ...}; the
// reply {"rc": exit status, "out": text for stdout, "err": text for stderr}
// plus op-specific members, or {"error": "..."} for a malformed request.
// Strings that may hold any bytes (script, paths, environment) are sent as
// plain JSON strings when they are valid UTF-8, else as {"base64": "..."}
// (encode_bytes/decode_bytes).
//
// Adding an op: write `Reply handle_OP(Ctx&, const Peer&, const json&)` in
// requests.cpp, check the peer with ctx.auth (is_admin / may_act_on /
// may_submit), and list it in the dispatcher table there.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dynres/config.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

using json = nlohmann::json;

/// Who is asking: the kernel's word for a Unix socket peer (SO_PEERCRED).
struct Peer {
  uint32_t uid = 0;
  uint32_t gid = 0;
  pid_t pid = 0;
};

/// SO_PEERCRED of a connected Unix socket; nullopt when the kernel cannot say.
std::optional<Peer> peer_of(int fd);
/// This process's real identity (the tools' own fallback when no daemon runs).
Peer self_peer();

/// What a peer may do on a cluster owned by `owner` (the daemon's effective
/// uid, which owns the state file).
struct Authority {
  uint32_t owner = 0;
  /// Cluster owner or root: admin actions (pcorridor set, node updates,
  /// policy changes) and acting on any user's job.
  bool is_admin(const Peer& p) const { return p.uid == 0 || p.uid == owner; }
  /// May p change job of user job_uid (cancel, signal, hold, release, resize)?
  bool may_act_on(const Peer& p, int64_t job_uid) const { return is_admin(p) || static_cast<int64_t>(p.uid) == job_uid; }
  /// "" when p may submit; else why not. A daemon running as root runs every
  /// user's jobs as that user (mjstepd drops privileges); a daemon running as
  /// an ordinary user can only run jobs as itself, so it accepts only its
  /// owner's submissions.
  std::string may_submit(const Peer& p) const;
};

/// What a handler works on.
struct Ctx {
  State& st;
  std::string home;
  Config cfg;
  Authority auth;
  bool wake = false;  ///< set by a handler when the scheduler should run a pass soon
};

/// Run a client request (ops: submit, cancel, hold, release, node_cpus,
/// corridor_set). nullopt for an op that is not one of these (the daemon's
/// own: ping, wake, mj_hello, resize). Never throws: bad input becomes a
/// reply with rc != 0 and a message in "err", or {"error": ...}.
std::optional<json> handle_request(Ctx& ctx, const Peer& peer, const json& req);

/// A byte string as JSON: itself when valid UTF-8, else {"base64": "..."}.
json encode_bytes(const std::string& s);
/// The inverse of encode_bytes; throws std::invalid_argument for anything else.
std::string decode_bytes(const json& j);

/// The whole reply as the tool prints it: "out" to stdout, "err" to stderr,
/// returns "rc" (1 for an {"error"} reply, printed as "TOOL: error: ...").
int print_reply(const std::string& tool, const json& reply);

/// Client: send req to the scheduler of home and return its reply. When no
/// scheduler listens there and this process owns the state file (or is
/// root), the request runs here instead (header comment); otherwise throws
/// std::runtime_error saying the scheduler is not running.
json call_scheduler(const std::string& home, const json& req);

}  // namespace dynres::schedd
