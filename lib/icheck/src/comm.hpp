// Minimal collective layer of libicheck: MPI when the application passed a
// communicator, trivial single-process versions otherwise.
#pragma once
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>
#ifdef ICHECK_HAVE_MPI
#include <mpi.h>
#endif

namespace dynres::icheck {

class Comm {
 public:
  Comm() = default;
  void set(const void* comm_ptr) {
#ifdef ICHECK_HAVE_MPI
    if (comm_ptr) {
      int init = 0;
      MPI_Initialized(&init);
      if (init) {
        MPI_Comm_dup(*static_cast<const MPI_Comm*>(comm_ptr), &comm_);
        mpi_ = true;
        MPI_Comm_rank(comm_, &rank_);
        MPI_Comm_size(comm_, &size_);
        MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node_);
        MPI_Comm_rank(node_, &node_rank_);
        MPI_Comm_size(node_, &node_size_);
        int leader = node_rank_ == 0 ? 1 : 0;
        polite([&](MPI_Request* q_) { return MPI_Iallreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_, q_); });
        // node index = number of leaders among lower world ranks (leaders
        // are the lowest world rank of their node: split key = world rank)
        int before = 0;
        polite([&](MPI_Request* q_) { return MPI_Iexscan(&leader, &before, 1, MPI_INT, MPI_SUM, comm_, q_); });
        if (rank_ == 0) before = 0;
        node_index_ = before;
        polite([&](MPI_Request* q_) { return MPI_Ibcast(&node_index_, 1, MPI_INT, 0, node_, q_); });
      }
    }
#else
    (void)comm_ptr;
#endif
  }
  void free() {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int fin = 0;
      MPI_Finalized(&fin);
      if (!fin) MPI_Comm_free(&node_), MPI_Comm_free(&comm_);
      mpi_ = false;
      node_rank_ = 0, node_size_ = 1, node_index_ = 0, nodes_ = 1, rank_ = 0, size_ = 1;
    }
#endif
  }
  int rank() const { return rank_; }
  int size() const { return size_; }
  int nodes() const { return nodes_; }
  /// SHMR (§6.2.2): rank within this node, processes on this node, index of
  /// this node among the application's nodes (0..nodes()-1).
  int node_rank() const { return node_rank_; }
  int node_size() const { return node_size_; }
  int node_index() const { return node_index_; }
  bool node_leader() const { return node_rank_ == 0; }
  void node_barrier() {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) polite([&](MPI_Request* q_) { return MPI_Ibarrier(node_, q_); });
#endif
  }
  /// Broadcast a string from the node leader to the node's processes.
  std::string node_bcast(const std::string& s) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long n = (long long)s.size();
      polite([&](MPI_Request* q_) { return MPI_Ibcast(&n, 1, MPI_LONG_LONG, 0, node_, q_); });
      std::string out = node_rank_ == 0 ? s : std::string(size_t(n), '\0');
      if (n) polite([&](MPI_Request* q_) { return MPI_Ibcast(out.data(), int(n), MPI_CHAR, 0, node_, q_); });
      return out;
    }
#endif
    return s;
  }
  /// Every node process's value, in node-rank order.
  std::vector<int64_t> node_allgather(int64_t v) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long in = v;
      std::vector<long long> out(static_cast<size_t>(node_size_));
      polite([&](MPI_Request* q_) { return MPI_Iallgather(&in, 1, MPI_LONG_LONG, out.data(), 1, MPI_LONG_LONG, node_, q_); });
      return std::vector<int64_t>(out.begin(), out.end());
    }
#endif
    return {v};
  }
  /// Gather strings at the node leader (others get an empty vector).
  std::vector<std::string> node_gather(const std::string& s) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int n = int(s.size());
      std::vector<int> lens(static_cast<size_t>(node_size_)), displ(static_cast<size_t>(node_size_));
      polite([&](MPI_Request* q_) { return MPI_Igather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, node_, q_); });
      std::string all;
      if (node_rank_ == 0) {
        int t = 0;
        for (int i = 0; i < node_size_; ++i) displ[i] = t, t += lens[i];
        all.resize(size_t(t));
      }
      polite([&](MPI_Request* q_) { return MPI_Igatherv(s.data(), n, MPI_CHAR, all.data(), lens.data(), displ.data(), MPI_CHAR, 0, node_, q_); });
      std::vector<std::string> out;
      if (node_rank_ == 0)
        for (int i = 0; i < node_size_; ++i) out.push_back(all.substr(size_t(displ[i]), size_t(lens[i])));
      return out;
    }
#endif
    return {s};
  }
  bool mpi() const { return mpi_; }

  /// Logical AND of `ok` over all ranks.
  bool all(bool ok) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int v = ok ? 1 : 0, r = 0;
      polite([&](MPI_Request* q_) { return MPI_Iallreduce(&v, &r, 1, MPI_INT, MPI_MIN, comm_, q_); });
      return r == 1;
    }
#endif
    return ok;
  }
  int64_t max(int64_t v) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long in = v, out = 0;
      polite([&](MPI_Request* q_) { return MPI_Iallreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, comm_, q_); });
      return out;
    }
#endif
    return v;
  }
  int min_int(int v) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int out = 0;
      polite([&](MPI_Request* q_) { return MPI_Iallreduce(&v, &out, 1, MPI_INT, MPI_MIN, comm_, q_); });
      return out;
    }
#endif
    return v;
  }
  /// Broadcast a string from rank 0.
  std::string bcast(const std::string& s) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long n = (long long)s.size();
      polite([&](MPI_Request* q_) { return MPI_Ibcast(&n, 1, MPI_LONG_LONG, 0, comm_, q_); });
      std::string out = rank_ == 0 ? s : std::string(size_t(n), '\0');
      if (n) polite([&](MPI_Request* q_) { return MPI_Ibcast(out.data(), int(n), MPI_CHAR, 0, comm_, q_); });
      return out;
    }
#endif
    return s;
  }
  /// All ranks' k int64 values (rank-major).
  std::vector<int64_t> allgather(const std::vector<int64_t>& mine) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      std::vector<long long> in(mine.begin(), mine.end()), out(mine.size() * size_t(size_));
      polite([&](MPI_Request* q_) { return MPI_Iallgather(in.data(), int(in.size()), MPI_LONG_LONG, out.data(), int(in.size()), MPI_LONG_LONG, comm_, q_); });
      return std::vector<int64_t>(out.begin(), out.end());
    }
#endif
    return mine;
  }
  /// Gather strings at rank 0 (others get an empty vector).
  std::vector<std::string> gather(const std::string& s) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int n = int(s.size());
      std::vector<int> lens(static_cast<size_t>(size_)), displ(static_cast<size_t>(size_));
      polite([&](MPI_Request* q_) { return MPI_Igather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_, q_); });
      std::string all;
      if (rank_ == 0) {
        int t = 0;
        for (int i = 0; i < size_; ++i) displ[i] = t, t += lens[i];
        all.resize(size_t(t));
      }
      polite([&](MPI_Request* q_) { return MPI_Igatherv(s.data(), n, MPI_CHAR, all.data(), lens.data(), displ.data(), MPI_CHAR, 0, comm_, q_); });
      std::vector<std::string> out;
      if (rank_ == 0)
        for (int i = 0; i < size_; ++i) out.push_back(all.substr(size_t(displ[i]), size_t(lens[i])));
      return out;
    }
#endif
    return {s};
  }
  void barrier() {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) polite([&](MPI_Request* q_) { return MPI_Ibarrier(comm_, q_); });
#endif
  }

 private:
#ifdef ICHECK_HAVE_MPI
  /// Run one nonblocking collective (`start` posts it into the request) to
  /// completion without holding a CPU: MPI_Test in a loop for ~50 us, then
  /// between tests a sleep growing from 20 us to 250 us. Blocking MPI
  /// collectives busy-poll (MPICH ch4), so the ranks that reach the end of
  /// a commit first would take the cores that the slower ranks' RMA
  /// progress threads and the agents need whenever processes outnumber
  /// cores (4 ranks + agent on 2 cores: a 256 MiB commit took 2.2 s,
  /// 60 % of the CPU in MPI progress; bench/icheck/run.sh). The cost is at
  /// most one nap (<= 250 us) per collective after the first 50 us.
  template <class Start>
  static void polite(Start start) {
    MPI_Request q = MPI_REQUEST_NULL;
    if (start(&q) != MPI_SUCCESS) return;  // MPI's error handler has spoken (default: abort)
    const auto t0 = std::chrono::steady_clock::now();
    long nap_ns = 20000;
    for (int done = 0;;) {
      MPI_Test(&q, &done, MPI_STATUS_IGNORE);
      if (done) return;
      if (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(50)) continue;
      timespec ts{0, nap_ns};
      ::nanosleep(&ts, nullptr);
      nap_ns = std::min(nap_ns * 2, 250000L);
    }
  }
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;
#endif
  bool mpi_ = false;
  int rank_ = 0, size_ = 1, nodes_ = 1;
  int node_rank_ = 0, node_size_ = 1, node_index_ = 0;
};

}  // namespace dynres::icheck
