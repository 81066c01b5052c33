// taskbag — the in-place malleable task-parallel runtime of the nqueens and
// pi examples (in place and task-parallel, like Finnerty et al.'s APGAS model
// without Java, a shared bag of tasks instead of work stealing).
//
// One coordinator process (the job script runs it on the job's first node)
// and one worker process per node of the job. Workers connect back to the
// coordinator over a Unix socket in a private (0700) directory under the
// job's working directory (all "nodes" of the local virtual cluster and of
// the outer Slurm fixture share one machine and one file system), are
// checked by SO_PEERCRED to run as the same user, and pull tasks one at a
// time: hello -> config -> (task -> result)* -> stop. Frames are dynres/proto
// JSON frames; every number received is range-checked.
//
// Inside a dynres job (MJ_JOB_ID, MJ_SECRET, MJ_SOCKET set) the coordinator
// registers the job as malleable (include/mj.h) and probes for orders between
// task hand-outs:
//   expand: mj_adapt_begin, mj_launch a worker on every added node, commit
//           once each has said hello;
//   shrink: the leaving workers (order.nodes, or the coordinator's choice for
//           a shrink by count, named in the commit) get "stop" instead of
//           their next task, finish the one they hold and exit; commit when
//           they are gone;
//   rollback (probe -1 or commit MJ_ERR_ROLLED_BACK): the workers started by
//           the expand are stopped / the nodes of a shrink get workers again.
// A worker that disconnects without its result hands its task back to the
// bag, so the result never depends on the number of workers, the order in
// which tasks complete, or the resizes: every task's value is an integer
// computed from the task id alone and the result is their sum.
//
// Outside a job the coordinator runs fixed-size with --workers N local
// worker processes.
//
// Output (stdout, one line each, key=value):
//   resize expand 2->8 latency_s=0.123 order=7          (order received -> commit acknowledged)
//   resize shrink 8->3 latency_s=0.045 order=8
//   <app line printed by App::print>
//   taskbag tasks=T workers_max=W resizes=R elapsed_s=E
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace taskbag {

/// Summary of a finished run, for App::print.
struct Stats {
  uint64_t tasks = 0;      ///< tasks computed
  int workers_start = 0;   ///< workers at the start
  int workers_end = 0;     ///< workers at the end
  int workers_max = 0;     ///< most workers at once
  int expands = 0, shrinks = 0, rollbacks = 0;
  double elapsed_s = 0;    ///< wall seconds from start to the last result
};

/// A task-parallel application: `ntasks` tasks, task k's value computed by
/// compute(k) on a worker, the result the sum of all values (exact integers,
/// so it is independent of where and in which order the tasks ran).
struct App {
  std::string name;                 ///< e.g. "nqueens" (log prefix)
  uint64_t ntasks = 0;              ///< > 0
  std::vector<uint64_t> params;     ///< sent to the workers in the config frame (at most 16)
  /// Worker side: validate params (throw std::invalid_argument) and prepare;
  /// afterwards num_tasks() must equal the coordinator's ntasks.
  std::function<void(const std::vector<uint64_t>& params)> setup;
  std::function<uint64_t()> num_tasks;
  std::function<uint64_t(uint64_t task)> compute;  ///< task < ntasks
  /// Coordinator side: print the result line(s) to stdout.
  std::function<void(uint64_t sum, const Stats& st)> print;
};

/// Options common to every taskbag application.
struct Options {
  int workers = 2;          ///< fixed-size run outside a job: local worker processes (1..256)
  double task_sleep_ms = 0; ///< extra sleep per task on the workers (tests: runs long enough to resize)
  double commit_delay_ms = 0; ///< commit an adaptation no earlier than this after the order (tests: rollbacks)
  bool verbose = false;     ///< log hand-outs and adaptation steps to stderr
};

/// True when argv asks for the worker role (argv[1] == "--taskbag-worker");
/// then call worker_main.
bool is_worker(int argc, char** argv);
/// Worker role: argv = PROG --taskbag-worker SOCKET [NODE]. Returns the exit code.
int worker_main(int argc, char** argv, App& app);
/// Coordinator role: run app to the end (malleable inside a dynres job, with
/// opt.workers local workers otherwise), print, return the exit code (0 ok,
/// 1 failure, messages on stderr).
int coordinator_main(App& app, const Options& opt);

}  // namespace taskbag
