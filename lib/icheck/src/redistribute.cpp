// icheck_redistribute [John24 §7.4.1.2, §7.4.2, Listing 7.2]: after an
// adaptation every process of the new set calls it once per label and
// receives its part of the newest committed version.
//
// Where the bytes come from:
//   agents         every old rank's piece is held by some agent (checked,
//                  checksums verified by the agents, in Adapt::restart):
//                  each new rank reads only the byte ranges it needs by RMA,
//                  all agents at once (Client::read_agents); the data moves
//                  once, agent memory -> the rank's object (BLOCK) or through
//                  a bounded bounce window (CYCLIC, small grid rows).
//   second level   no agent holds the version (direct mode, agents gone), or
//                  an agent fails during the reads: the old ranks' parts as
//                  they (or their agents) wrote them, checked per chunk.
// The plan of what to read is redist::fill (redist.hpp), the same code the
// redistributing icheck_restore/icheck_restart_all use.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "adapt.hpp"
#include "adapt_old.hpp"
#include "comm.hpp"

namespace dynres::icheck {

namespace {
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
}  // namespace

redist::Reader Adapt::old_reader(const std::string& label) {
  redist::Reader rd;
  std::shared_ptr<Old> o = old_;
  Client* c = &c_;
  // each old rank's region of `label` (byte offset in its piece), looked up once
  auto regs = std::make_shared<std::vector<std::optional<Old::Reg>>>(size_t(old_n_));
  auto reg = [o, regs, label](int src) -> const Old::Reg& {
    auto& x = (*regs)[size_t(src)];
    if (!x) x = o->find(src, label);
    if (!x) throw std::runtime_error("old rank " + std::to_string(src) + " stored no region '" + label + "'");
    return *x;
  };
  if (!o->agents.is_null()) {
    rd.target = [c](char* p, uint64_t n) {
      if (!c->add_read_target(p, n)) throw AgentReadError(c->last_error());
    };
    rd.read = [o, c, reg](std::vector<redist::Read>& batch) {
      std::vector<AgentRead> reads;
      reads.reserve(batch.size());
      for (auto& x : batch) {
        const Old::Reg& r = reg(x.src);
        if (x.off > r.bytes || x.len > r.bytes - x.off) throw std::runtime_error("read outside a stored region");
        reads.push_back({o->agents[size_t(x.src)]["agent"].get<int>(), x.src, o->v, r.offset + x.off, x.len, x.dst});
      }
      if (!c->read_agents(reads)) throw AgentReadError(c->last_error());
    };
  } else {
    rd.read = [o, reg](std::vector<redist::Read>& batch) {
      for (auto& x : batch) {
        const Old::Reg& r = reg(x.src);
        if (x.off > r.bytes || x.len > r.bytes - x.off) throw std::runtime_error("read outside a stored region");
        o->st->read_range(o->m, *r.pfs, x.off, x.dst, size_t(x.len));
      }
    };
  }
  return rd;
}

int Adapt::redistribute(const char* label, void* ptr, size_t count) {
  RestartView v = c_.restart_view();
  if (!v.inited) return ICHECK_ESTATE;
  Comm& comm = *v.comm;
  // Collective: every rank names the same label (a mismatch would pair
  // different collectives below).
  const std::string mine = label ? label : "";
  if (!comm.all(label && comm.bcast(mine) == mine)) {
    c_.set_error("icheck_redistribute: the ranks passed different labels (or NULL)");
    return ICHECK_EINVAL;
  }
  auto it = by_label_.find(mine);
  int rc = it == by_label_.end() ? int(ICHECK_ENOENT) : int(ICHECK_OK);
  if (rc != ICHECK_OK) c_.set_error("icheck_redistribute: label '" + mine + "' was not added on this rank");
  rc = comm.min_int(rc);
  if (rc != ICHECK_OK) return rc;
  Entry& e = entries_[it->second];
  // The first call after an adaptation finds the version and its old layout
  // (Adapt::restart: agents first, else the second level).
  // ICHECK_TIMING=1: where the time goes (bench/icheck/redist), rank 0
  const bool timing = std::getenv("ICHECK_TIMING") && comm.rank() == 0;
  const double t0 = timing ? now_s() : 0;
  if (mode_ == Mode::None) {
    rc = comm.min_int(restart(true, true));
    if (rc != ICHECK_OK) return rc;
  }
  const double t1 = timing ? now_s() : 0;
  struct Drop {
    Client& c;
    ~Drop() { c.clear_read_targets(); }
  } drop{c_};
  rc = restore_entry(e, ptr, count);
  int worst = comm.min_int(rc);
  if (verify_pending_) {
    // the agents' checksum check ran beside the reads: bytes of a piece
    // that failed it are never kept
    verify_pending_ = false;
    const std::string bad = c_.verify_wait();
    if (!bad.empty()) {
      c_.set_error("corrupt: " + bad);
      worst = ICHECK_EAGENT;
    }
  }
  if (worst == ICHECK_EAGENT && mode_ == Mode::Redist && old_ && !old_->agents.is_null()) {
    // An agent failed during the reads: every rank takes the second level
    // for this label and the ones after it.
    if (comm.rank() == 0) std::fprintf(stderr, "icheck: WARNING: %s; redistributing '%s' from the second level\n", c_.last_error(), e.label.c_str());
    c_.clear_read_targets();
    rc = open_pfs();
    if (rc == ICHECK_OK) rc = restore_entry(e, ptr, count);
    worst = comm.min_int(rc);
  }
  if (timing)
    std::fprintf(stderr, "icheck: redistribute '%s' timing: find version %.4f s, move %.4f s (rank 0)\n", e.label.c_str(), t1 - t0,
                 now_s() - t1);
  return worst;
}

}  // namespace dynres::icheck
