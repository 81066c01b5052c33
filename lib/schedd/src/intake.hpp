// New connections on mjsched.sock until their first frame is complete,
// read without blocking from the daemon's poll loop: a peer that sends half a
// frame, or nothing, never delays a pass, a ping or a submission (mjsched(8),
// "LIMITS"). Caps, per uid of the peer (SO_PEERCRED): connections waiting
// for their first frame, bytes buffered for them; a first frame is refused
// from its announced length when over kMaxFirstFrame, and a connection that
// has not completed it within kFirstFrameSeconds is closed.
#pragma once
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dynres/proto.hpp"
#include "dynres/requests.hpp"
#include "dynres/schedd.hpp"

namespace dynres::schedd {

/// At most `burst` lines per key per `window` seconds; the rest are counted
/// and summarised in the next line logged for that key.
class RateLimitedLog {
 public:
  RateLimitedLog(std::function<void(const std::string&)> sink, int burst = 5, double window = 10)
      : sink_(std::move(sink)), burst_(burst), window_(window) {}
  void operator()(const std::string& key, const std::string& msg, double now) {
    auto& b = keys_[key];
    if (now - b.start >= window_) {
      if (b.dropped) sink_(std::to_string(b.dropped) + " more '" + key + "' message(s) not logged in the last " +
                           std::to_string(static_cast<int>(window_)) + " s");
      b = {now, 0, 0};
    }
    if (b.logged < burst_) {
      ++b.logged;
      sink_(msg);
    } else {
      ++b.dropped;
    }
  }

 private:
  struct Bucket {
    double start = -1e300;
    int logged = 0;
    long dropped = 0;
  };
  std::function<void(const std::string&)> sink_;
  int burst_;
  double window_;
  std::map<std::string, Bucket> keys_;
};

class Intake {
 public:
  static constexpr size_t kMaxFirstFrame = size_t{6} << 20;  ///< a submission: 4 MiB script + 1 MiB environment + room
  static constexpr int kMaxPerUid = 32;                      ///< connections waiting for their first frame, per uid
  static constexpr size_t kMaxBufferedPerUid = size_t{16} << 20;  ///< bytes buffered for them, per uid
  static constexpr int kMaxTotal = 512;                      ///< all uids together
  static constexpr double kFirstFrameSeconds = 10;

  /// A first frame of fd, complete: the connection leaves the intake and
  /// the caller owns fd (the connection is switched back to blocking).
  using Ready = Incoming;

  explicit Intake(RateLimitedLog& log) : log_(log) {}
  ~Intake() {
    for (auto& [fd, c] : conns_) ::close(fd);
  }

  /// Accept every queued connection. What is already there is read at once:
  /// a client that sent its whole request (the usual case) is served without
  /// ever counting against the caps; only unfinished first frames wait. Over
  /// a cap, the oldest waiting connection of the uid with the most of them is
  /// closed.
  std::vector<Ready> accept_all(int lfd, double now);

  void accept_all_into(int lfd, double now, std::vector<Ready>& ready) {
    for (;;) {
      int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (c < 0) return;
      auto peer = peer_of(c);
      if (!peer) {
        ::close(c);
        continue;
      }
      timeval tv{1, 0};  // a reply never blocks the daemon for long on a peer that does not read
      ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      conns_.emplace(c, Conn{*peer, proto::FrameReader(kMaxFirstFrame), now + kFirstFrameSeconds});
      if (auto r = on_readable(c, now)) {
        ready.push_back(std::move(*r));
        continue;
      }
      if (!conns_.count(c)) continue;  // closed or refused already
      // Over a cap: the oldest waiting connection of the uid with the most
      // of them goes (not the new one, which may be an honest client of the
      // same user whose request is still on its way).
      while (static_cast<int>(conns_.size()) > kMaxTotal || count(peer->uid) > kMaxPerUid) {
        uint32_t uid = peer->uid;
        if (count(uid) <= kMaxPerUid)
          for (auto& [fd, x] : conns_)
            if (count(x.peer.uid) > count(uid)) uid = x.peer.uid;
        auto oldest = conns_.end();
        for (auto it = conns_.begin(); it != conns_.end(); ++it)
          if (it->second.peer.uid == uid && it->first != c && (oldest == conns_.end() || it->second.deadline < oldest->second.deadline))
            oldest = it;
        if (oldest == conns_.end()) break;
        log_("cap:" + std::to_string(uid),
             "closed a connection of uid " + std::to_string(uid) + " (pid " + std::to_string(oldest->second.peer.pid) +
                 "): more than " + std::to_string(kMaxPerUid) + " of its connections wait for their first frame",
             now);
        ::close(oldest->first);
        conns_.erase(oldest);
      }
    }
  }

  int count(uint32_t uid) const {
    int n = 0;
    for (auto& [fd, x] : conns_) n += x.peer.uid == uid;
    return n;
  }

  std::vector<int> fds() const {
    std::vector<int> v;
    for (auto& [fd, c] : conns_) v.push_back(fd);
    return v;
  }

  /// fd is readable: read what is there; the completed first frame, if any.
  /// A connection that closed, sent a malformed or oversized frame, or went
  /// over its uid's byte cap is closed (and logged, rate-limited).
  std::optional<Ready> on_readable(int fd, double now) {
    auto it = conns_.find(fd);
    if (it == conns_.end()) return std::nullopt;
    Conn& c = it->second;
    auto drop = [&](const std::string& why) {
      if (!why.empty())
        log_("bad:" + std::to_string(c.peer.uid),
             "refused a message of uid " + std::to_string(c.peer.uid) + " (pid " + std::to_string(c.peer.pid) + "): " + why,
             now);
      ::close(fd);
      conns_.erase(it);
      return std::nullopt;
    };
    // read what is there now (a local client's request arrives at once;
    // at most one first frame's worth per call)
    bool closed = false;
    for (size_t k = 0;; ++k) {
      const size_t before = c.reader.pending();
      if (!c.reader.fill(fd)) {
        closed = true;
        break;
      }
      if (c.reader.pending() - before < 16384 || k > (kMaxFirstFrame >> 14) || c.reader.pending() > kMaxFirstFrame + 4) break;
    }
    size_t buffered = 0;
    for (auto& [f, x] : conns_)
      if (x.peer.uid == c.peer.uid) buffered += x.reader.pending();
    if (buffered > kMaxBufferedPerUid)
      return drop("more than " + std::to_string(kMaxBufferedPerUid) + " bytes buffered for its unfinished frames");
    try {
      auto m = c.reader.next();
      if (!m) return closed ? drop(c.reader.pending() ? "connection closed in the middle of a frame" : "") : std::nullopt;
      Ready r{fd, c.peer, std::move(*m)};
      conns_.erase(it);
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
      return r;
    } catch (const proto::ProtoError& e) {
      return drop(e.what());
    }
  }

  /// Close connections whose first frame did not complete in time.
  /// (Defined below: accept_all collects what accept_all_into finds.)
  void expire(double now) {
    for (auto it = conns_.begin(); it != conns_.end();) {
      if (now < it->second.deadline) {
        ++it;
        continue;
      }
      log_("slow:" + std::to_string(it->second.peer.uid),
           "closed a connection of uid " + std::to_string(it->second.peer.uid) + ": no complete frame within " +
               std::to_string(static_cast<int>(kFirstFrameSeconds)) + " s",
           now);
      ::close(it->first);
      it = conns_.erase(it);
    }
  }

 private:
  struct Conn {
    Peer peer;
    proto::FrameReader reader;
    double deadline;
  };
  RateLimitedLog& log_;
  std::map<int, Conn> conns_;
};

inline std::vector<Intake::Ready> Intake::accept_all(int lfd, double now) {
  std::vector<Ready> ready;
  accept_all_into(lfd, now, ready);
  return ready;
}

}  // namespace dynres::schedd
