/* mjtest — a malleable job for the resize-protocol tests, written against
 * the C API of mj.h (so the tests exercise libmj as applications do).
 *
 *   mjtest serve SECONDS   register, then carry out every order until
 *                          SECONDS pass; deregister; exit 0.
 *   mjtest restart         restart-based resizing: on an order, adapt-begin
 *                          with MJ_ADAPT_RESTART and exit 0; when run again
 *                          (MJ_RESUMED) commit the order and serve on.
 *   mjtest hello           connect and print the status (for auth tests)
 *   mjtest role NODE SECONDS  a process of the job on NODE (MJ_NODE) that
 *                          registers, probes, and prints the role libmj gives
 *                          it for the first order ("role ID leave|stay NODE"),
 *                          leaving the order to the job's serving process;
 *                          then exits (without deregistering the job)
 *   mjtest register-twice  register, deregister, register again (refused)
 *   mjtest commit-bogus    commit an order never sent (refused)
 *   mjtest perf MPI COMP   report performance once
 *   mjtest badargs         every C API call with an argument it must
 *                          refuse; one line each: "badargs CALL CODE"
 *   mjtest raw MODE        bad input on a raw connection to MJ_SOCKET:
 *                          garbage (a frame that is not JSON), oversized (a
 *                          frame announcing 1 GiB), half (half a frame, then
 *                          silence for 3 s), notobject (a JSON array), flood
 *                          (small frames without ever reading a reply)
 *
 * Behaviour on an order (serve), from the environment:
 *   MJT_DELAY=S     wait S seconds between adapt-begin and commit
 *   MJT_RESUME_DELAY=S  (restart) when run again, wait S seconds before
 *                   committing the resumed order
 *   MJT_IGNORE=1    never answer orders (the scheduler's timeout rolls back)
 *   MJT_CRASH=1     SIGKILL itself after adapt-begin (mid-resize)
 *   MJT_SLOW_EXPAND=S  the same, for expand orders only
 *   MJT_LAUNCH=1    on expand, mj_launch `sleep 600` on each added node
 *                   before committing (a rollback must kill them)
 * Every event is one line on stdout: "order ID KIND FROM->TO", "committed
 * ID", "rolled_back ID", "launched NODE PID", "status KIND ..." */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "mj.h"

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int check(int rc, const char* what) {
  if (rc != MJ_OK) {
    printf("error %s %d %s: %s\n", what, rc, mj_strerror(rc), mj_last_error());
    fflush(stdout);
  }
  return rc;
}

static pid_t launched[MJ_MAX_ORDER_NODES];
static int nlaunched = 0;

static void carry_out(const mj_order* o) {
  double t0 = now();
  printf("order %lld %s %d->%d\n", (long long)o->id, o->kind == MJ_ORDER_EXPAND ? "expand" : "shrink",
         o->num_nodes_before, o->num_nodes_after);
  fflush(stdout);
  if (getenv("MJT_IGNORE")) return;
  if (check(mj_adapt_begin(o, 0), "begin") != MJ_OK) return;
  if (getenv("MJT_CRASH")) kill(getpid(), SIGKILL);
  if (getenv("MJT_LAUNCH") && o->kind == MJ_ORDER_EXPAND) {
    for (int i = 0; i < o->num_nodes; ++i) {
      char* argv[] = {"sleep", "600", NULL};
      pid_t p;
      if (check(mj_launch(o->nodes[i], argv, &p), "launch") == MJ_OK) {
        launched[nlaunched++] = p;
        printf("launched %s %d\n", o->nodes[i], (int)p);
        fflush(stdout);
      }
    }
  }
  const char* d = getenv("MJT_DELAY");
  if (!d && o->kind == MJ_ORDER_EXPAND) d = getenv("MJT_SLOW_EXPAND");
  if (d) {
    double s = atof(d);
    struct timespec ts = {(time_t)s, (long)((s - (time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
  }
  int rc = mj_adapt_commit(o->id, NULL, 0);
  if (rc == MJ_OK) printf("committed %lld %.6f\n", (long long)o->id, now() - t0);
  else if (rc == MJ_ERR_ROLLED_BACK) printf("rolled_back %lld\n", (long long)o->id);
  else check(rc, "commit");
  fflush(stdout);
}

static int serve(double seconds, int restart) {
  double end = now() + seconds;
  while (now() < end) {
    int pending = 0;
    mj_order o;
    int rc = mj_wait_adapt(0.05, &pending, NULL, &o);
    if (rc == MJ_ERR_CONNECT) { /* the job continues at its size; libmj reconnects */
      struct timespec ts = {0, 100000000};
      nanosleep(&ts, NULL);
      continue;
    }
    if (check(rc, "probe") != MJ_OK) return 1;
    if (pending == -1) {
      printf("rolled_back %lld\n", (long long)o.id);
      fflush(stdout);
    } else if (pending == 1) {
      if (restart) {
        printf("order %lld %s %d->%d\n", (long long)o.id, o.kind == MJ_ORDER_EXPAND ? "expand" : "shrink",
               o.num_nodes_before, o.num_nodes_after);
        if (check(mj_adapt_begin(&o, MJ_ADAPT_RESTART), "begin") == MJ_OK) {
          printf("restarting\n");
          fflush(stdout);
          return 0;
        }
      } else {
        carry_out(&o);
      }
    }
  }
  /* reap processes started on added nodes (killed by libmj on a rollback) */
  for (int i = 0; i < nlaunched; ++i) {
    int st;
    if (waitpid(launched[i], &st, WNOHANG) == launched[i])
      printf("reaped %d %s\n", (int)launched[i], WIFSIGNALED(st) ? "killed" : "exited");
  }
  check(mj_deregister(), "deregister");
  return 0;
}

static int role(double seconds) {
  if (check(mj_register(), "register") != MJ_OK) return 1;
  printf("registered\n");
  fflush(stdout);
  double end = now() + seconds;
  while (now() < end) {
    int pending = 0;
    mj_role r = MJ_ROLE_JOIN;
    mj_order o;
    if (check(mj_wait_adapt(0.05, &pending, &r, &o), "probe") != MJ_OK) return 1;
    if (pending == 1) {
      printf("role %lld %s %s\n", (long long)o.id, r == MJ_ROLE_LEAVE ? "leave" : r == MJ_ROLE_STAY ? "stay" : "join",
             getenv("MJ_NODE"));
      fflush(stdout);
      return 0;
    }
  }
  printf("no order\n");
  return 1;
}

static int raw(const char* mode) {
  const char* path = getenv("MJ_SOCKET");
  if (!path) return 2;
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  strncpy(a.sun_path, path, sizeof a.sun_path - 1);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) return 3;
  char hello[512];
  int n = snprintf(hello + 4, sizeof hello - 4, "{\"op\":\"mj_hello\",\"job\":%s,\"secret\":\"%s\"}",
                   getenv("MJ_JOB_ID"), getenv("MJ_SECRET"));
  hello[0] = 0, hello[1] = 0, hello[2] = (char)(n >> 8), hello[3] = (char)n;
  if (write(fd, hello, (size_t)n + 4) != n + 4) return 4;
  char buf[4096];
  ssize_t r = read(fd, buf, sizeof buf); /* the hello's answer */
  printf("hello answered %zd bytes\n", r);
  if (!strcmp(mode, "garbage")) {
    const char f[] = "\0\0\0\x0anot json!!";
    (void)!write(fd, f, sizeof f - 1);
  } else if (!strcmp(mode, "oversized")) {
    const char f[] = "\x40\0\0\0{";
    (void)!write(fd, f, sizeof f - 1);
  } else if (!strcmp(mode, "half")) {
    const char f[] = "\0\0\0\x64{\"op\":";
    (void)!write(fd, f, sizeof f - 1);
    sleep(3);
  } else if (!strcmp(mode, "flood")) {
    /* tiny valid frames, far faster than they are served, never reading the
       replies: the scheduler must cut the connection, not buffer it all */
    static char chunk[65536];
    const char f[] = "{\"op\":\"mj_progress\",\"fraction\":0.5}";
    size_t fl = sizeof f - 1, off = 0;
    while (off + fl + 4 <= sizeof chunk) {
      chunk[off] = 0, chunk[off + 1] = 0, chunk[off + 2] = (char)(fl >> 8), chunk[off + 3] = (char)fl;
      memcpy(chunk + off + 4, f, fl);
      off += fl + 4;
    }
    struct timeval stv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof stv);
    signal(SIGPIPE, SIG_IGN);
    size_t sent = 0;
    while (sent < (64u << 20)) {
      ssize_t w = send(fd, chunk, off, MSG_NOSIGNAL);
      if (w <= 0) break;
      sent += (size_t)w;
    }
    printf("raw flood: sent %zu bytes\n", sent);
  } else if (!strcmp(mode, "notobject")) {
    const char f[] = "\0\0\0\x07[1,2,3]";
    (void)!write(fd, f, sizeof f - 1);
  } else {
    return 2;
  }
  /* the scheduler must close the connection (EOF) rather than serve it on */
  struct timeval tv = {5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  do  /* replies sent before the close may come first */
    r = read(fd, buf, sizeof buf);
  while (r > 0);
  printf("raw %s: %s\n", mode, r == 0 || errno == ECONNRESET ? "closed by the scheduler" : "still open");
  close(fd);
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && !strcmp(argv[1], "raw")) return raw(argv[2]);
  if (argc == 4 && !strcmp(argv[1], "role")) setenv("MJ_NODE", argv[2], 1);
  if (argc < 2) {
    fprintf(stderr, "usage: mjtest serve SECONDS | restart SECONDS | role NODE SECONDS | hello | register-twice | commit-bogus | perf M C\n");
    return 2;
  }
  mj_status st;
  int rc = mj_init_adapt(&st);
  if (rc != MJ_OK) {
    printf("error init %d %s: %s\n", rc, mj_strerror(rc), mj_last_error());
    return 3;
  }
  printf("status %s job=%lld nodes=%d old=%d nodelist=%s restart=%d\n",
         st.kind == MJ_NEW ? "NEW" : st.kind == MJ_JOINING ? "JOINING" : "RESUMED", (long long)st.job, st.num_nodes,
         st.old_num_nodes, st.nodelist, st.restart_count);
  fflush(stdout);
  const char* cmd = argv[1];
  if (!strcmp(cmd, "hello")) return 0;
  if (!strcmp(cmd, "role") && argc == 4) return role(atof(argv[3]));
  if (!strcmp(cmd, "perf") && argc == 4) return check(mj_report_perf(atof(argv[2]), atof(argv[3])), "perf") ? 1 : 0;
  if (!strcmp(cmd, "commit-bogus")) {
    rc = mj_adapt_commit(999999, NULL, 0);
    printf("commit-bogus %d %s\n", rc, mj_last_error());
    return rc == MJ_OK ? 1 : 0;
  }
  if (!strcmp(cmd, "badargs")) {
    int pending = 0;
    mj_role role;
    mj_order none = {0}, unknown = {0};
    unknown.id = 424242;
    const char* one_null[] = {NULL};
    char* no_argv[] = {NULL};
    pid_t pid;
#define BAD(name, call) printf("badargs %s %d\n", name, (call))
    BAD("probe-null", mj_probe_adapt(NULL, &role, NULL));
    BAD("wait-huge-timeout", mj_wait_adapt(1e9, &pending, &role, NULL));
    BAD("wait-nan-timeout", mj_wait_adapt(0.0 / 0.0, &pending, &role, NULL));
    BAD("begin-null", mj_adapt_begin(NULL, 0));
    BAD("begin-id-0", mj_adapt_begin(&none, 0));
    BAD("begin-unknown-flag", mj_adapt_begin(&unknown, 0x100));
    BAD("begin-not-pending", mj_adapt_begin(&unknown, 0));
    BAD("commit-id-0", mj_adapt_commit(0, NULL, 0));
    BAD("commit-negative-released", mj_adapt_commit(1, NULL, -1));
    BAD("commit-released-null-list", mj_adapt_commit(1, NULL, 2));
    BAD("commit-released-null-name", mj_adapt_commit(1, one_null, 1));
    BAD("progress-above-1", mj_report_progress(1.5));
    BAD("progress-negative", mj_report_progress(-0.1));
    BAD("perf-zero-sum", mj_report_perf(0, 0));
    BAD("perf-infinite", mj_report_perf(1.0 / 0.0, 1));
    BAD("launch-no-node", mj_launch("", no_argv, &pid));
    BAD("launch-no-argv", mj_launch("n0", no_argv, &pid));
#undef BAD
    return 0;
  }
  if (!strcmp(cmd, "register-twice")) {
    if (check(mj_register(), "register") || check(mj_deregister(), "deregister")) return 1;
    rc = mj_register();
    printf("re-register %d %s\n", rc, mj_last_error());
    return rc == MJ_ERR_STATE ? 0 : 1;
  }
  if ((!strcmp(cmd, "serve") || !strcmp(cmd, "restart")) && argc == 3) {
    int restart = !strcmp(cmd, "restart");
    if (st.kind == MJ_RESUMED) {
      const char* rd = getenv("MJT_RESUME_DELAY");
      if (rd) usleep((useconds_t)(atof(rd) * 1e6));
      rc = mj_adapt_commit(st.order, NULL, 0);
      if (rc == MJ_OK) printf("committed %lld resumed %d->%d\n", (long long)st.order, st.old_num_nodes, st.num_nodes);
      else if (rc == MJ_ERR_ROLLED_BACK) printf("rolled_back %lld\n", (long long)st.order);
      else check(rc, "commit");
      fflush(stdout);
    }
    if (check(mj_register(), "register") != MJ_OK) return 1;
    printf("registered\n");
    fflush(stdout);
    return serve(atof(argv[2]), restart);
  }
  fprintf(stderr, "mjtest: unknown command %s\n", cmd);
  return 2;
}
