// Slurm-style node lists ("n[1-4,7]", "a1,b[01-03]").
#pragma once
#include <string>
#include <vector>

namespace dynres {

/// Expand a node-list expression into host names, in order.
/// "n[1-3,7],gpu01" -> {"n1","n2","n3","n7","gpu01"}; zero padding of range
/// bounds is kept ("n[01-03]" -> n01 n02 n03).
/// Throws std::invalid_argument naming the offending part for malformed input
/// (unbalanced brackets, empty ranges, hi < lo).
std::vector<std::string> expand_hostlist(const std::string& expr);

/// Compress host names into Slurm's form: names sharing a prefix and numeric
/// suffix width are merged into ranges, in first-appearance order of prefixes
/// ({"n1","n2","n3","n7"} -> "n[1-3,7]"; a single host stays plain).
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace dynres
