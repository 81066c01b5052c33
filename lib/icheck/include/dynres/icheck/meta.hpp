// The redistribution metadata of one checkpoint part ("__icheck_adapt",
// JSON text written by libicheck's Adapt at every commit, [John24 §7.4.1]):
//   {"format": 1, "nranks": N, "rank": r, "entries": [
//      {"label", "role", "type", "count"  (local elements of rank r),
//       distributed objects also "dist": block|cyclic|explicit|grid|manual,
//       "global"; block/cyclic "width"; explicit "offset" (rank r's first
//       global element); grid "dims" and "shape"}]}
// Roles: plain, constant, size, rank, default, default_joining, volatile,
// global, manual. Header only; read by libicheck's restore (adapt.cpp) and by
// icredist (lib/icredist), so both rebuild the old layout the same way.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "dynres/icheck/dist.hpp"

namespace dynres::icheck::meta {

/// Label of the metadata region in every part.
inline constexpr const char* kLabel = "__icheck_adapt";

/// Rebuild the layout over N = olds.size() processes of a BLOCK / CYCLIC /
/// PREDEFINED (explicit or grid) object from each old rank's entry. Checks
/// that every rank recorded the same global count, that the layout is valid
/// and that each rank's recorded count agrees with it. Returns "" and sets
/// `from`, or what is wrong. MANUAL ("manual") is not a layout: refused here.
inline std::string old_layout(const std::vector<const nlohmann::json*>& olds, dist::Layout& from) {
  const int N = int(olds.size());
  if (N < 1) return "no old ranks";
  from = {};
  from.nprocs = N;
  std::vector<uint64_t> counts(static_cast<size_t>(N));
  try {
    from.global = olds[0]->value("global", uint64_t(0));
    const std::string kind = olds[0]->value("dist", "");
    for (int i = 0; i < N; ++i) {
      const nlohmann::json& o = *olds[size_t(i)];
      if (o.value("dist", "") != kind || o.value("global", uint64_t(0)) != from.global)
        return "old rank " + std::to_string(i) + " recorded another distribution or global count";
      counts[size_t(i)] = o.value("count", uint64_t(0));
    }
    if (kind == "block" || kind == "cyclic") {
      from.kind = kind == "block" ? dist::Kind::Block : dist::Kind::Cyclic;
      from.width = olds[0]->value("width", uint64_t(0));
    } else if (kind == "explicit") {
      from.kind = dist::Kind::Explicit;
      for (int i = 0; i < N; ++i)
        from.counts.push_back(counts[size_t(i)]), from.offsets.push_back(olds[size_t(i)]->value("offset", uint64_t(0)));
    } else if (kind == "grid") {
      from.kind = dist::Kind::Grid;
      from.dims = olds[0]->at("dims").get<std::vector<int>>();
      from.shape = olds[0]->at("shape").get<std::vector<uint64_t>>();
    } else {
      return "unknown distribution '" + kind + "'";
    }
  } catch (const std::exception&) {
    return "distribution metadata malformed";
  }
  std::string why = dist::validate(from);
  if (!why.empty()) return "recorded layout invalid: " + why;
  for (int i = 0; i < N; ++i)
    if (dist::local_count(from, i) != counts[size_t(i)])
      return "recorded count of old rank " + std::to_string(i) + " disagrees with its layout";
  return "";
}

}  // namespace dynres::icheck::meta
