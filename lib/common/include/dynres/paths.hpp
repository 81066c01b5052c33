// Locations of a virtual cluster's files under $DYNRES_HOME.
#pragma once
#include <string>

namespace dynres {

/// The cluster directory: the explicit argument if non-empty, else
/// $DYNRES_HOME. Throws std::runtime_error when neither is set, telling the
/// user to run vcluster-boot and source $DYNRES_HOME/env.
std::string cluster_home(const std::string& explicit_home = "");

std::string state_path(const std::string& home);    ///< home/state.db
std::string sched_socket(const std::string& home);  ///< home/mjsched.sock
std::string config_path(const std::string& home);   ///< home/dynres.yaml
std::string spool_dir(const std::string& home);     ///< home/spool

/// Current wall-clock time in seconds since the epoch (sub-second precision).
double now_seconds();

}  // namespace dynres
