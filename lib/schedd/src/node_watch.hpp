// mjsched's node liveness: one connection per node agent (mjnoded(8), the
// role of Slurm's slurmd registration and ping), and the node-state request
// of mjcontrol update node (Slurm's scontrol update NodeName= State=).
//
// A node is lost when its agent's connection closes (the agent was killed,
// as in a crash: detected at once) or when the agent sends nothing for
// Config::node_timeout seconds (a frozen or unreachable node; SlurmdTimeout).
// A lost node is set DOWN in the state file with reason "Not responding";
// it stays DOWN until mjcontrol update node state=resume (Slurm's
// ReturnToService=0). Policies never hand out a node that is not up; what
// happens to the jobs on it is sched::react_to_nodes().
#pragma once
#include <sys/types.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dynres/proto.hpp"
#include "dynres/state.hpp"

namespace dynres::schedd {

/// One line "TIME mjsched: MSG" on stderr (mjsched.log), flushed.
void daemon_log(const std::string& msg);

class NodeWatch {
 public:
  using Log = std::function<void(const std::string&)>;
  /// timeout: seconds without a heartbeat before a node is DOWN (0: nodes
  /// are not watched: agents may connect but nothing is judged); started:
  /// the daemon's start time (no node is judged within timeout of it).
  NodeWatch(double timeout, double started, Log log);
  ~NodeWatch();

  /// A new connection whose first frame was {"op":"node_hello","node":NAME}
  /// from peer uid/pid (SO_PEERCRED). Accepted only from the cluster's owner
  /// (this daemon's uid) or root, for a node of the state file; a second
  /// agent for a node replaces the first. Answers {"ok":true,"heartbeat":S}
  /// or {"error":...} (then closes fd). Takes ownership of fd.
  void adopt(State& st, int fd, const proto::json& hello, uid_t uid, pid_t pid, double heartbeat, double now);
  std::vector<int> fds() const;
  /// fd readable: heartbeat frames ({"op":"heartbeat"}, at most 256 bytes
  /// each) refresh the node; EOF, an I/O error or anything else closes the
  /// connection and marks the node lost. Returns true when a node was lost.
  bool on_readable(int fd, double now);
  /// Once per pass: read what agents sent meanwhile (without blocking), then
  /// set DOWN every up or drained node that is lost or silent past the
  /// timeout. Returns the nodes set down now.
  std::vector<std::string> sweep(State& st, double now);
  /// True when node's agent is connected and heard from within the timeout.
  bool alive(const std::string& node, double now) const;

 private:
  struct Conn {
    int fd = -1;
    std::string node;
    pid_t pid = 0;
    proto::FrameReader in{256};
  };
  void drop(int fd, double now, const std::string& why);
  double timeout_, started_;
  Log log_;
  std::map<int, Conn> conns_;                ///< fd -> agent
  std::map<std::string, double> last_;       ///< node -> last heartbeat (or connect)
  std::map<std::string, std::string> lost_;  ///< node -> why its agent went away
};

/// The request {"op":"update_node","nodes":LIST,"state":"down|drain|resume",
/// "reason":TEXT} of peer uid (mjcontrol update node ... state=): only the
/// cluster's owner (this daemon's uid) or root; every member checked (node
/// list at most 4096 characters, reason at most 256 printable characters).
/// Reply {"ok":true,"nodes":[{"name","from","to"}...]} or {"error":...};
/// nothing changes on an error.
proto::json update_node_request(State& st, uid_t peer, const proto::json& m, double now);

}  // namespace dynres::schedd
