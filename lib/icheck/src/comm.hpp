// Minimal collective layer of libicheck: MPI when the application passed a
// communicator, trivial single-process versions otherwise.
#pragma once
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
        MPI_Allreduce(&leader, &nodes_, 1, MPI_INT, MPI_SUM, comm_);
        // node index = number of leaders among lower world ranks (leaders
        // are the lowest world rank of their node: split key = world rank)
        int before = 0;
        MPI_Exscan(&leader, &before, 1, MPI_INT, MPI_SUM, comm_);
        if (rank_ == 0) before = 0;
        node_index_ = before;
        MPI_Bcast(&node_index_, 1, MPI_INT, 0, node_);
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
    if (mpi_) MPI_Barrier(node_);
#endif
  }
  /// Broadcast a string from the node leader to the node's processes.
  std::string node_bcast(const std::string& s) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long n = (long long)s.size();
      MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, node_);
      std::string out = node_rank_ == 0 ? s : std::string(size_t(n), '\0');
      if (n) MPI_Bcast(out.data(), int(n), MPI_CHAR, 0, node_);
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
      MPI_Allgather(&in, 1, MPI_LONG_LONG, out.data(), 1, MPI_LONG_LONG, node_);
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
      MPI_Gather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, node_);
      std::string all;
      if (node_rank_ == 0) {
        int t = 0;
        for (int i = 0; i < node_size_; ++i) displ[i] = t, t += lens[i];
        all.resize(size_t(t));
      }
      MPI_Gatherv(s.data(), n, MPI_CHAR, all.data(), lens.data(), displ.data(), MPI_CHAR, 0, node_);
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
      MPI_Allreduce(&v, &r, 1, MPI_INT, MPI_MIN, comm_);
      return r == 1;
    }
#endif
    return ok;
  }
  int64_t max(int64_t v) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      long long in = v, out = 0;
      MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MAX, comm_);
      return out;
    }
#endif
    return v;
  }
  int min_int(int v) {
#ifdef ICHECK_HAVE_MPI
    if (mpi_) {
      int out = 0;
      MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MIN, comm_);
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
      MPI_Bcast(&n, 1, MPI_LONG_LONG, 0, comm_);
      std::string out = rank_ == 0 ? s : std::string(size_t(n), '\0');
      if (n) MPI_Bcast(out.data(), int(n), MPI_CHAR, 0, comm_);
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
      MPI_Allgather(in.data(), int(in.size()), MPI_LONG_LONG, out.data(), int(in.size()), MPI_LONG_LONG, comm_);
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
      MPI_Gather(&n, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, comm_);
      std::string all;
      if (rank_ == 0) {
        int t = 0;
        for (int i = 0; i < size_; ++i) displ[i] = t, t += lens[i];
        all.resize(size_t(t));
      }
      MPI_Gatherv(s.data(), n, MPI_CHAR, all.data(), lens.data(), displ.data(), MPI_CHAR, 0, comm_);
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
    if (mpi_) MPI_Barrier(comm_);
#endif
  }

 private:
#ifdef ICHECK_HAVE_MPI
  MPI_Comm comm_ = MPI_COMM_NULL;
  MPI_Comm node_ = MPI_COMM_NULL;
#endif
  bool mpi_ = false;
  int rank_ = 0, size_ = 1, nodes_ = 1;
  int node_rank_ = 0, node_size_ = 1, node_index_ = 0;
};

}  // namespace dynres::icheck
