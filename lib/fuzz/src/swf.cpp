// The SWF reader of mjsim (lib/sim read_swf) on a file of the input's bytes,
// then (for small traces) an FCFS simulation of what it read, as mjsim runs
// it. Byte 0 picks the processors per node. Oracle: errors are
// std::runtime_error naming the file; jobs read have a size >= 1 and finite,
// non-negative times; simulate() ends (libFuzzer's -timeout catches a hang)
// or refuses the trace with std::invalid_argument.
#include <cmath>
#include <typeinfo>

#include "common.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/sim.hpp"

namespace dynres::fuzz {

using detail::require;

void swf(const uint8_t* data, size_t size) {
  if (size < 1) return;
  const int ppn = 1 + data[0] % 8;
  const std::string path = detail::write_input("trace.swf", data + 1, size - 1);
  sim::SwfTrace tr;
  try {
    tr = sim::read_swf(path, ppn, 0);
  } catch (const std::runtime_error& e) {
    detail::require_named(e, path, "read_swf");
    return;
  } catch (const std::exception& e) {
    throw Violation(std::string("read_swf: not a runtime_error: ") + typeid(e).name() + ": " + e.what());
  }
  for (auto& j : tr.jobs) {
    require(j.req_nodes >= 1 && j.min_nodes >= 1 && j.max_nodes >= j.min_nodes, "job " + std::to_string(j.id) +
                                                                                  ": bad size " + std::to_string(j.req_nodes));
    require(std::isfinite(j.submit) && j.submit >= 0 && std::isfinite(j.runtime) && j.runtime >= 0 &&
                std::isfinite(j.time_limit),
            "job " + std::to_string(j.id) + ": time not finite or negative");
  }
  if (tr.jobs.size() > 64) return;
  sim::SimOptions o;
  o.nodes = tr.max_nodes > 0 && tr.max_nodes <= 4096 ? tr.max_nodes : 64;
  o.policy.policy = sched::Policy::fcfs;
  std::erase_if(tr.jobs, [&](const sim::SimJob& j) { return j.req_nodes > o.nodes; });
  try {
    auto r = sim::simulate(std::move(tr.jobs), o);
    require(std::isfinite(r.metrics.makespan), "makespan not finite");
  } catch (const std::invalid_argument&) {
  }
}

}  // namespace dynres::fuzz
