// A job script's #SBATCH/#MJ directives (lib/jobspec) as mjsub reads them:
// parsed, applied to a spec and resolved into a job record for a 16-node
// cluster of 4-CPU nodes. Oracle: only SpecError comes out, naming something
// (not a bare conversion name); a resolved record is within its own bounds.
#include <cmath>
#include <typeinfo>

#include "common.hpp"
#include "dynres/fuzz.hpp"
#include "dynres/jobspec.hpp"

namespace dynres::fuzz {

using detail::require;

void jobspec(const uint8_t* data, size_t size) {
  const std::string script(reinterpret_cast<const char*>(data), size);
  JobRecord r;
  try {
    JobSpec spec;
    apply_directives(spec, parse_directives(script));
    r = resolve_job(spec, 16, script, "fuzz", "/nonexistent", 4);
  } catch (const SpecError& e) {
    std::string m = e.what();
    require(!m.empty(), "SpecError without a message");
    // the message quotes the script's words: only what is left is the reason
    std::string reason = m;
    for (size_t b = 0; b < script.size();) {
      size_t e2 = script.find('\n', b);
      if (e2 == std::string::npos) e2 = script.size();
      std::string line = script.substr(b, e2 - b);
      b = e2 + 1;
      for (size_t at; line.size() > 2 && (at = reason.find(line)) != std::string::npos;) reason.erase(at, line.size());
    }
    for (const char* bare : {"stoi", "stol", "stoll", "stod", "stof", "stoul"}) {
      const std::string b = bare;
      require(!(reason.size() >= b.size() && reason.compare(reason.size() - b.size(), b.size(), b) == 0 &&
                (reason.size() == b.size() || reason[reason.size() - b.size() - 1] == ' ')),
              "SpecError ends in a bare conversion name: " + m.substr(0, 300));
    }
    return;
  } catch (const std::exception& e) {
    throw Violation(std::string("not a SpecError: ") + typeid(e).name() + ": " + std::string(e.what()).substr(0, 300));
  }
  require(r.min_nodes >= 1 && r.min_nodes <= r.req_nodes && r.req_nodes <= r.max_nodes && r.max_nodes <= 16,
          "node counts out of order: " + std::to_string(r.min_nodes) + " <= " + std::to_string(r.req_nodes) +
              " <= " + std::to_string(r.max_nodes) + " <= 16");
  require(r.time_limit >= -1, "time limit " + std::to_string(r.time_limit));
  require((!r.min_power || std::isfinite(*r.min_power)) && (!r.max_power || std::isfinite(*r.max_power)),
          "power bound not finite");
}

}  // namespace dynres::fuzz
