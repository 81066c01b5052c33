// mjstepd — per-job supervisor started by mjsched (the role of slurmstepd).
// Not meant to be run by hand; see mjsched(8).
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "dynres/launch.hpp"

int main(int argc, char** argv) {
  CLI::App app{"dynres job step supervisor (started by mjsched)", "mjstepd"};
  dynres::launch::StepConfig cfg;
  int go_fd = -1;
  app.add_option("--home", cfg.home, "cluster directory")->required();
  app.add_option("--job", cfg.job_id, "job id")->required();
  app.add_option("--launcher", cfg.launcher, "local|srun")->check(CLI::IsMember({"local", "srun"}));
  app.add_option("--kill-wait", cfg.kill_wait, "seconds from SIGTERM to SIGKILL");
  app.add_option("--go-fd", go_fd, "descriptor to wait on before starting");
  CLI11_PARSE(app, argc, argv);
  // mjsched runs with umask 077 (its state file is private). Job output
  // files get the submitter's umask (recorded by mjsub), the job too; SQLite
  // gives the state file's WAL the main file's mode. The spool's node file
  // must be readable by the job's user: 022 for the supervisor's own files.
  ::umask(022);
  try {
    return dynres::launch::run_step(cfg, go_fd);
  } catch (const std::exception& e) {
    std::cerr << "mjstepd: job " << cfg.job_id << ": " << e.what() << "\n";
    return 1;
  }
}
