#include "dynres/paths.hpp"

#include <chrono>
#include <cstdlib>
#include <stdexcept>

namespace dynres {

std::string cluster_home(const std::string& explicit_home) {
  if (!explicit_home.empty()) return explicit_home;
  const char* h = std::getenv("DYNRES_HOME");
  if (h && *h) return h;
  throw std::runtime_error(
      "DYNRES_HOME is not set: boot a cluster with vcluster-boot and 'source $DYNRES_HOME/env', "
      "or pass --home");
}

std::string state_path(const std::string& home) { return home + "/state.db"; }
std::string sched_socket(const std::string& home) { return home + "/mjsched.sock"; }
std::string config_path(const std::string& home) { return home + "/dynres.yaml"; }
std::string spool_dir(const std::string& home) { return home + "/spool"; }

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace dynres
