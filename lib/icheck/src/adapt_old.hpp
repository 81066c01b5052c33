// Private to libicheck's data redistribution (adapt.cpp, redistribute.cpp):
// the N-process version a redistributing restore or icheck_redistribute
// reads, and where each old rank's regions are.
#pragma once
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "adapt.hpp"
#include "dynres/ckstore.hpp"
#include "dynres/icheck/types.hpp"

namespace dynres::icheck {

using json = nlohmann::json;

/// An RMA read from an agent failed (the agent died or refused): the
/// redistribution can take the second level instead.
struct AgentReadError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The N-process version a redistributing restore reads: from the agents'
/// memory (agents != null: per old rank the holding agent and its regions)
/// or from the second level (st, m).
struct Adapt::Old {
  std::unique_ptr<ckstore::Store> st;
  ckstore::Manifest m;
  json agents;             ///< from the agents: [{agent, total, regions}] per old rank, else null
  int64_t v = 0;
  std::vector<json> meta;  ///< per old rank: its metadata
  struct Reg {
    int type = 0;
    uint64_t count = 0, offset = 0, bytes = 0;
    const ckstore::Region* pfs = nullptr;
  };
  /// Region `label` of old rank `rank`, or nullopt.
  std::optional<Reg> find(int rank, const std::string& label) const {
    if (!agents.is_null()) {
      if (rank < 0 || size_t(rank) >= agents.size()) return std::nullopt;
      for (auto& x : agents[size_t(rank)]["regions"])
        if (x.value("label", "") == label) {
          Reg r;
          r.type = x.value("type", 0), r.count = x.value("count", uint64_t(0)), r.offset = x.value("offset", uint64_t(0));
          r.bytes = r.count * icheck_elem_size(r.type);
          return r;
        }
      return std::nullopt;
    }
    const ckstore::Region* reg = m.find(rank, label);
    if (!reg) return std::nullopt;
    Reg r;
    r.type = int(reg->info.type), r.count = reg->info.count, r.bytes = reg->bytes(), r.pfs = reg;
    return r;
  }
  /// Bytes [off, off+n) of region `r` of old rank `rank` into dst; throws.
  void read(Client& c, int rank, const Reg& r, uint64_t off, void* dst, uint64_t n) const {
    if (off > r.bytes || n > r.bytes - off) throw std::runtime_error("read outside a stored region");
    if (!agents.is_null()) {
      if (!c.read_agent(agents[size_t(rank)]["agent"].get<int>(), rank, v, r.offset + off, dst, n))
        throw AgentReadError(c.last_error());
      return;
    }
    st->read_range(m, *r.pfs, off, dst, size_t(n));
  }
};

}  // namespace dynres::icheck
