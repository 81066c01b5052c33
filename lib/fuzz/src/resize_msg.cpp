// mjsched's resize-protocol handler (lib/schedd ResizeServer) driven through
// its real entry points: a job started in a real state file, its connection
// a socket pair adopted after mj_hello, the input's lines sent as frames and
// served by on_readable() as the daemon's poll loop does. Oracle: nothing
// escapes the server, every reply is a JSON object answering an op ("re") or
// pushing one ("op"), and the state file stays consistent (the job holds
// exactly the nodes the book says).
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>

#include "../../schedd/src/resize_server.hpp"
#include "common.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/hostlist.hpp"
#include "dynres/resize_store.hpp"
#include "dynres/state.hpp"

namespace dynres::fuzz {

using detail::require;
using json = proto::json;

namespace {

constexpr int kNodes = 6;

/// A fresh state file per input, copied from one made once (same ids every
/// time: the job is 1, the first order 1), so that an input replays alike.
std::unique_ptr<State> fresh_state() {
  const std::string tmpl = detail::work_dir() + "/resize-template.db", path = detail::work_dir() + "/resize-state.db";
  static bool made = false;
  if (!made) {
    State st(tmpl, true);
    resize::migrate(st);
    std::vector<std::pair<std::string, std::string>> nodes;
    for (int i = 1; i <= kNodes; ++i) nodes.push_back({"n" + std::to_string(i), "n" + std::to_string(i)});
    st.register_nodes(nodes);
    st.db().exec("PRAGMA wal_checkpoint(TRUNCATE)");  // everything in the main file, for the copies
    made = true;
  }
  for (const char* ext : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + ext);
  std::filesystem::copy_file(tmpl, path);
  if (std::filesystem::exists(tmpl + "-wal")) std::filesystem::copy_file(tmpl + "-wal", path + "-wal");
  return std::make_unique<State>(path);
}

/// Frame the bytes as they would travel: raw, or one frame per line.
std::string stream_of(const uint8_t* p, size_t n, bool raw) {
  if (raw) return std::string(reinterpret_cast<const char*>(p), n);
  std::string out;
  size_t b = 0;
  while (b < n) {
    const uint8_t* nl = static_cast<const uint8_t*>(std::memchr(p + b, '\n', n - b));
    size_t e = nl ? static_cast<size_t>(nl - p) : n;
    uint32_t len = static_cast<uint32_t>(e - b);
    char hdr[4] = {char(len >> 24), char(len >> 16), char(len >> 8), char(len)};
    out.append(hdr, 4).append(reinterpret_cast<const char*>(p + b), len);
    b = e + 1;
  }
  return out;
}

void frame(std::string& out, const json& m) {
  std::string s = m.dump();
  uint32_t len = static_cast<uint32_t>(s.size());
  char hdr[4] = {char(len >> 24), char(len >> 16), char(len >> 8), char(len)};
  out.append(hdr, 4).append(s);
}

}  // namespace

void resize_msg(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const uint8_t mode = data[0];
  auto own = fresh_state();
  State& st = *own;
  double now = 1000;

  // a malleable job of this uid running on n1,n2 with its protocol record
  JobRecord j;
  j.name = "fuzz";
  j.uid = ::getuid();
  j.kind = "malleable";
  j.req_nodes = 2, j.min_nodes = 1, j.max_nodes = kNodes;
  j.script = "#!/bin/sh\ntrue\n";
  j.workdir = j.stdout_path = j.stderr_path = "/nonexistent";
  j.submit_time = now;
  const int64_t job = st.submit(j);
  const std::string secret = "fuzz-secret";
  std::vector<int64_t> ids;
  std::vector<std::string> names;
  for (auto& n : st.nodes())
    if (n.name == "n1" || n.name == "n2") ids.push_back(n.id), names.push_back(n.name);
  require(st.start_job(job, ids, ::getpid(), now, [&] { resize::admit(st, job, secret); }), "cannot start the job");

  std::vector<std::string> log;
  {
    schedd::ResizeServer rz(resize::Options{}, [&](const std::string& m) { log.push_back(m); });
    rz.load(st, now);  // as mjsched after a start: the job is known from its record

    int sv[2];
    require(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair failed");
    const int peer = sv[0], served = sv[1];
    ::fcntl(peer, F_SETFL, O_NONBLOCK);
    rz.adopt(st, served, json{{"op", "mj_hello"}, {"job", job}, {"secret", secret}});

    proto::FrameReader replies;
    auto drain = [&] {
      while (replies.fill(peer) && replies.pending() > 0) {
        size_t before = replies.pending();
        try {
          while (auto m = replies.next())
            require(m->is_object() && (m->contains("re") || m->contains("op")), "reply without re/op: " + m->dump());
        } catch (const proto::ProtoError& e) {
          throw Violation(std::string("the server sent a bad frame: ") + e.what());
        }
        if (replies.pending() == before) break;
      }
    };
    // as the daemon's poll loop: on_readable() when the connection is readable
    auto serve = [&] {
      for (int k = 0; k < 1000; ++k) {
        auto fds = rz.fds();
        if (std::find(fds.begin(), fds.end(), served) == fds.end()) return;
        pollfd p{served, POLLIN, 0};
        if (::poll(&p, 1, 0) <= 0) return;
        rz.on_readable(st, served, now);
        drain();
      }
    };

    std::string stream;
    if (mode & 1) frame(stream, {{"op", "mj_register"}});
    std::string in = stream_of(data + 1, size - 1, mode & 8);
    // the job registers first; the scheduler then orders (expand or shrink)
    if (mode & 6) {
      size_t w = 0;
      while (w < stream.size()) {
        ssize_t r = ::send(peer, stream.data() + w, stream.size() - w, MSG_NOSIGNAL);
        if (r <= 0) break;
        w += static_cast<size_t>(r);
      }
      stream.clear();
      rz.on_readable(st, served, now);
      drain();
      sched::Snapshot snap;
      snap.now = now;
      for (int i = 1; i <= kNodes; ++i) snap.nodes.push_back({"n" + std::to_string(i), true, i <= 2 ? job : 0});
      sched::RunningJob r;
      r.id = job;
      r.kind = sched::JobKind::malleable;
      r.nodes = {0, 1};
      r.min_nodes = 1, r.max_nodes = kNodes;
      snap.running.push_back(r);
      std::string why;
      rz.admin_resize(st, static_cast<uint32_t>(::getuid()), job, mode & 2 ? 4 : 1, snap, now, &why, mode & 4 && mode & 2);
    }
    stream += in;
    size_t sent = 0;
    const double step = (mode >> 4) * 4.0;
    for (int rounds = 0; rounds < 100000; ++rounds) {
      if (sent < stream.size()) {
        ssize_t r = ::send(peer, stream.data() + sent, std::min<size_t>(stream.size() - sent, 4096), MSG_NOSIGNAL);
        if (r > 0) sent += static_cast<size_t>(r);
        if (sent == stream.size()) ::shutdown(peer, SHUT_WR);
      } else if (stream.empty()) {
        ::shutdown(peer, SHUT_WR);
      }
      serve();
      now += step;
      rz.tick(st, now);
      auto fds = rz.fds();
      if (std::find(fds.begin(), fds.end(), served) == fds.end()) break;
    }
    ::close(peer);
  }

  // the job holds in the state file what its allocation says, whatever happened
  for (auto& rec : st.jobs({kRunning}))
    if (rec.id == job) {
      int held = 0;
      for (auto& n : st.nodes()) held += n.job_id == job;
      require(held == rec.num_nodes, "job holds " + std::to_string(held) + " nodes, its record says " +
                                         std::to_string(rec.num_nodes));
      require(rec.nodelist.empty() ? held == 0 : static_cast<int>(expand_hostlist(rec.nodelist).size()) == held,
              "node list " + rec.nodelist + " does not match the nodes held");
    }
}

}  // namespace dynres::fuzz
