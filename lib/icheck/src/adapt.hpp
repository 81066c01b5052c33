// Data redistribution of libicheck [John24 §7.4.1]: the layer between
// the C API (capi.cpp) and Client that knows each object's role (plain,
// replicated with an attribute, or distributed), records it in every
// checkpoint part ("__icheck_adapt" region), and restores a checkpoint of
// N processes on M processes. See include/icheck.h for the contract.
#pragma once
#include <cstdarg>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dynres/icheck/client.hpp"
#include "dynres/icheck/dist.hpp"
#include "dynres/icheck/redist.hpp"
#include "icheck.h"

struct icheck_pmap {
  std::vector<dynres::icheck::dist::Layout> layouts;  ///< one per process count
};

namespace dynres::icheck {

class Adapt {
 public:
  explicit Adapt(Client& c) : c_(c) {}
  int add_plain(const char* label, void* ptr, size_t count, int type);
  int add_adapt(const char* label, void* ptr, size_t count, int type, int attr, va_list ap);
  int add_global(const char* label, void* ptr, int type, size_t global, int dist, va_list ap);
  int local_count(const char* label, size_t* count) const;
  int before_commit();
  /// in_place: with M == N restore every stored region where it was added
  /// (one RMA per rank, Client::restart_all) instead of into a library copy.
  /// defer_verify: the agents' checksum check of the version runs while
  /// the first icheck_redistribute reads (Client::verify_wait after it).
  int restart(bool in_place = false, bool defer_verify = false);
  int restore(const char* label, void* ptr, size_t count);
  int restart_all();
  /// icheck_redistribute (redistribute.cpp, [John24 §7.4.2]).
  int redistribute(const char* label, void* ptr, size_t count);
  int restart_size() const { return old_n_; }
  void clear();

  /// Reserved label of the per-part metadata region.
  static constexpr const char* kMetaLabel = "__icheck_adapt";

 private:
  enum class Role { Plain, Constant, Size, Rank, Default, DefaultJoining, Volatile, Global, Manual };
  struct Entry {
    std::string label;
    void* ptr = nullptr;
    size_t count = 0;  ///< local elements
    int type = 0;
    size_t es = 0;
    Role role = Role::Plain;
    std::vector<char> defval;
    icheck_recalc_fn recalc = nullptr;
    icheck_manual_fn manual = nullptr;
    void* arg = nullptr;
    int src = 0;
    dist::Layout layout;  ///< Global: over the current process count
    bool stored = false;  ///< registered with the Client (part of checkpoints)
  };
  bool special() const;  ///< any entry besides plain ones
  int check_new(const char* label, int type, size_t* es) const;
  int restore_entry(Entry& e, void* ptr, size_t count);
  int restore_same(Entry& e, void* ptr);
  int restore_redist(Entry& e, void* ptr);
  int set_value(Entry& e, void* ptr, double v);
  /// Collective: read the version from the second level (agents flush it first).
  int open_pfs();
  /// Reads of object `label` of the old ranks: the agents by RMA in
  /// parallel (throws AgentReadError) or the second level (redistribute.cpp).
  redist::Reader old_reader(const std::string& label);
  icheck_adapt_info info() const;
  std::string meta_json() const;

  Client& c_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> by_label_;
  std::string meta_;  ///< registered metadata (stable buffer)
  bool committed_ = false;
  bool verify_pending_ = false;  ///< restart(.., true) read from agents whose check is still running
  enum class Mode { None, Same, Redist } mode_ = Mode::None;
  int old_n_ = 0;
  int64_t version_ = 0;
  struct Old;  ///< the N-process checkpoint read for a redistributing restore
  std::shared_ptr<Old> old_;
};

}  // namespace dynres::icheck
