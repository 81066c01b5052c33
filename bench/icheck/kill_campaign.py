#!/usr/bin/env python3
"""iCheck kill campaign: an application commits
asynchronously every iteration (one iteration per --sleep-ms) through a real
iCheck service (icheck-boot: primary + standby controller, one manager per
node, agents, second level) while this driver SIGKILLs, at random moments,
a random agent of the application, a random manager, the active controller
or the application itself, --kills times. Each kill is followed by the
normal recovery: agents -- none needed (the library writes directly, a probe
returns to agents); managers -- relaunched by the controller; the active
controller -- the standby takes over, and the driver starts a new standby
once it has; the application -- rerun, which restarts from iCheck.

Checks, at every application restart (each rerun, and a final one):
  * the restored version is at least the newest one the killed run had
    reported committed ("COMMIT it v mode 0" is printed only after
    icheck_commit + icheck_wait returned OK): otherwise a LOSS;
  * the restored bytes are exactly those committed at that iteration: ictest
    --hash prints an FNV-1a hash of the checkpointed data after every commit
    and after every restore; a restore whose hash differs from the commit's
    is CORRUPT (a mix of versions or damaged bytes);
  * a restart that fails (icheck_restart_all error) after a version was
    committed counts as a loss too.
At the end the application runs to completion from its last restore and its
RESULT must equal an uninterrupted run's.

The application is ictest (lib/icheck/test/ictest.c), not synth: its state
at an iteration is the same in every run, so a restore can be checked byte
for byte against the commit of the same iteration.

usage: kill_campaign.py [--kills N] [--seed S] [--gap MIN MAX] [--size N]
                        [--sleep-ms MS] [--nodes N] [--keep] [--json FILE]
Prints one line per kill and a summary; exit 0 only when losses = 0,
corrupt = 0 and the final result matches.
Needs: icheckd, icagent, ictest on PATH (or DYNRES_BUILD/bin), icheck-boot
and icheck-down (share/dynres).
"""
import argparse
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.environ.get("DYNRES_SRC", os.path.normpath(os.path.join(HERE, "..", "..")))
BUILD = os.environ.get("DYNRES_BUILD", os.path.join(SRC, "build"))
os.environ["PATH"] = os.pathsep.join([os.path.join(BUILD, "bin"), os.path.join(SRC, "share", "dynres"),
                                      os.environ.get("PATH", "")])
for k in ("ICHECK_CONFIG", "ICHECK_TRANSFER", "ICHECK_TCP_AUTH", "ICHECK_ZERO_COPY", "ICHECK_STRATEGY",
          "DYNRES_HOME", "ICHECK_AGENT_TEST_OPS"):
    os.environ.pop(k, None)

APP = "camp"
ITERS = 100000          # never reached during the campaign
FINAL_EVERY = 10 ** 9   # the completion run commits no more


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Campaign:
    def __init__(self, a):
        self.a = a
        self.rng = random.Random(a.seed)
        self.w = tempfile.mkdtemp(prefix="dynres-killcamp-")
        os.chmod(self.w, 0o700)
        self.run_no = 0
        self.app = None          # Popen of the running application
        self.app_out = None
        self.hashes = {}         # iteration -> hash printed after its commit
        self.acked = 0           # newest version reported committed so far
        self.versions_acked = set()
        self.c = dict(kills=0, kills_agent=0, kills_manager=0, kills_controller=0, kills_app=0,
                      restarts=0, restores=0, restored_intact=0, restored_newest=0, restore_errors=0,
                      losses=0, corrupt=0, unverified=0, app_failures=0, skipped=0)
        self.standby_no = 0

    # ---------------------------------------------------------------- service
    def boot(self):
        env = dict(os.environ)
        cmd = ["icheck-boot", "--home", self.w, "--heartbeat", "1", "--misses", "2",
               "--relaunch-attempts", "100"] + [f"n{i + 1}" for i in range(self.a.nodes)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, timeout=60)
        os.environ["ICHECK_CONFIG"] = os.path.join(self.w, "icheck.yaml")

    def down(self):
        subprocess.run(["icheck-down", "--home", self.w], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def db(self, sql, args=()):
        for _ in range(50):
            try:
                con = sqlite3.connect(os.path.join(self.w, "state.db"), timeout=5)
                try:
                    return con.execute(sql, args).fetchall()
                finally:
                    con.close()
            except sqlite3.OperationalError:
                time.sleep(0.1)
        return []

    def pgrep(self, pattern):
        r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
        return [int(x) for x in r.stdout.split()]

    # ------------------------------------------------------------ application
    def start_app(self, final=False):
        self.run_no += 1
        out = os.path.join(self.w, f"app-{self.run_no}.out")
        err = os.path.join(self.w, f"app-{self.run_no}.err")
        if final:
            args = ["ictest", APP, str(self.a.size), str(self.a.final_iters), str(FINAL_EVERY), "--hash"]
        else:
            args = ["ictest", APP, str(self.a.size), str(ITERS), "1", "--async", "--sleep-ms",
                    str(self.a.sleep_ms), "--probe", "3", "--hash"]
        self.app = subprocess.Popen(args, stdout=open(out, "w"), stderr=open(err, "w"))
        self.app_out = out
        return out, err

    def parse(self, out):
        """(newest committed v, restored (it, v) or None, hashes of the run)"""
        acked, restored, hashes = 0, None, {}
        last_hash_for = None
        try:
            lines = open(out).read().splitlines()
        except OSError:
            lines = []
        for ln in lines:
            m = re.match(r"COMMIT (\d+) (\d+) \S+ (-?\d+)$", ln)
            if m and m.group(3) == "0":
                acked = max(acked, int(m.group(2)))
                self.versions_acked.add(int(m.group(2)))
                last_hash_for = ("commit", int(m.group(1)))
                continue
            m = re.match(r"RESTORED (\d+) (\d+)$", ln)
            if m:
                restored = [int(m.group(1)), int(m.group(2)), None]
                last_hash_for = ("restore", int(m.group(1)))
                continue
            m = re.match(r"HASH (\d+) ([0-9a-f]+)$", ln)
            if m and last_hash_for:
                kind, it = last_hash_for
                if int(m.group(1)) == it:
                    if kind == "commit":
                        hashes[it] = m.group(2)
                    elif restored:
                        restored[2] = m.group(2)
                last_hash_for = None
        return acked, restored, hashes

    def collect(self):
        """Fold the finished run's output into the campaign's knowledge."""
        acked, _, hashes = self.parse(self.app_out)
        self.acked = max(self.acked, acked)
        self.hashes.update(hashes)

    def check_restart(self, out, err):
        """Wait for the restarted run's restore and check it."""
        self.c["restarts"] += 1
        t0 = time.time()
        while time.time() - t0 < 60 and self.app.poll() is None:
            txt = open(out).read()
            if "STATUS new" in txt or "COMMIT" in txt or re.search(r"RESTORED .*\nHASH \S+ \S+\n", txt):
                break
            time.sleep(0.1)
        txt = open(out).read()
        _, restored, _ = self.parse(out)
        if restored is None:
            if self.acked > 0:
                self.c["losses"] += 1
                self.c["restore_errors"] += "STATUS restart" in txt
                log(f"  LOSS: version {self.acked} was committed but the rerun restored nothing "
                    f"(stdout {txt.splitlines()[:2]}, stderr {open(err).read()[-300:]!r})")
            return
        it, v, h = restored
        self.c["restores"] += 1
        ok_v = v >= self.acked
        if ok_v:
            self.c["restored_newest"] += 1
        else:
            self.c["losses"] += 1
            log(f"  LOSS: restored version {v} (iteration {it}), but version {self.acked} was committed")
        want = self.hashes.get(it)
        if want is None or h is None:
            self.c["unverified"] += 1
            log(f"  restored v{v} (iteration {it}): no hash of that iteration's commit to compare with")
        elif want == h:
            self.c["restored_intact"] += 1
            log(f"  restored v{v} (iteration {it}), newest committed v{self.acked}: bytes intact")
        else:
            self.c["corrupt"] += 1
            log(f"  CORRUPT: restored v{v} (iteration {it}) hash {h}, committed {want}")

    def restart_app(self):
        if self.app and self.app.poll() is None:
            self.app.kill()
        if self.app:
            self.app.wait()
            self.collect()
        out, err = self.start_app()
        self.check_restart(out, err)

    # ------------------------------------------------------------------ kills
    def kill_agent(self):
        pids = self.pgrep(f"icagent --listen unix:{self.w}/.* --app {APP} ")
        if not pids:
            return False
        os.kill(self.rng.choice(pids), signal.SIGKILL)
        return True

    def kill_manager(self):
        pids = self.pgrep(f"icheckd --role manager --node n[0-9]+ --config {self.w}/")
        if not pids:
            return False
        os.kill(self.rng.choice(pids), signal.SIGKILL)
        return True

    def kill_controller(self):
        row = self.db("SELECT pid, address, epoch FROM icheck_controller WHERE id = 1")
        if not row:
            return False
        pid, addr, epoch = row[0]
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        # recovery: the standby takes over (next epoch), then a new standby
        # is started on the address the dead controller served
        t0 = time.time()
        while time.time() - t0 < 30:
            r = self.db("SELECT epoch FROM icheck_controller WHERE id = 1")
            if r and r[0][0] > epoch:
                break
            time.sleep(0.2)
        else:
            log("  the standby did not take over within 30 s")
        self.standby_no += 1
        logf = os.path.join(self.w, "icheck", f"controller-standby-{self.standby_no}.log")
        p = subprocess.Popen(["icheckd", "--role", "controller", "--standby", "--config",
                              os.environ["ICHECK_CONFIG"], "--listen", addr],
                             stdout=open(logf, "w"), stderr=subprocess.STDOUT, start_new_session=True)
        with open(os.path.join(self.w, "icheck", "pids"), "a") as f:
            f.write(f"standby {p.pid}\n")
        return True

    def run(self):
        a = self.a
        log(f"work directory {self.w}; seed {a.seed}")
        ref_cfg = os.path.join(self.w, "direct.yaml")
        with open(ref_cfg, "w") as f:
            f.write(f"direct: true\npfs_dir: {self.w}/ref\n")
        ref = subprocess.run(["ictest", "ref", str(a.size), str(a.final_iters), str(FINAL_EVERY),
                              "--config", ref_cfg], capture_output=True, text=True, timeout=300)
        m = re.search(r"^RESULT (\S+)", ref.stdout, re.M)
        if not m:
            raise SystemExit("reference run failed: " + ref.stderr)
        ref_result = m.group(1)
        self.boot()
        self.start_app()
        time.sleep(2)
        weights = {"agent": 3, "manager": 2, "controller": 2, "app": 3}
        if a.sequence:
            seq = a.sequence.split(",")
        else:
            seq = [self.rng.choices(list(weights), list(weights.values()))[0] for _ in range(a.kills)]
        for i, target in enumerate(seq, 1):
            time.sleep(self.rng.uniform(*a.gap))
            if self.app.poll() is not None:  # the application ended by itself: a failure
                self.c["app_failures"] += 1
                log(f"  the application exited with {self.app.returncode}: "
                    f"{open(self.app_out.replace('.out', '.err')).read()[-300:]!r}; rerun")
                self.restart_app()
            done = {"agent": self.kill_agent, "manager": self.kill_manager,
                    "controller": self.kill_controller, "app": lambda: True}[target]()
            if not done:
                self.c["skipped"] += 1
                log(f"kill {i}: no {target} to kill")
                continue
            self.c["kills"] += 1
            self.c["kills_" + target] += 1
            log(f"kill {i}: {target}")
            if target == "app":
                self.restart_app()
        # the last check: kill the application once more and restart it to
        # completion (no further commits), then compare its result
        time.sleep(2)
        if self.app.poll() is None:
            self.app.kill()
        self.app.wait()
        self.collect()
        out, err = self.start_app(final=True)
        self.check_restart(out, err)
        try:
            self.app.wait(timeout=600)
        except subprocess.TimeoutExpired:
            self.app.kill()
        m = re.search(r"^RESULT (\S+)", open(out).read(), re.M)
        final_ok = bool(m) and m.group(1) == ref_result
        self.c["versions_acked"] = len(self.versions_acked)
        self.c["final_result_matches"] = int(final_ok)
        if not final_ok:
            log(f"final RESULT {m.group(1) if m else None} differs from the uninterrupted {ref_result}")
        return self.c

    def close(self):
        if self.app and self.app.poll() is None:
            self.app.kill()
        self.down()
        if not self.a.keep:
            for _ in range(20):
                if not self.pgrep(f"{self.w}/"):
                    break
                time.sleep(0.2)
            shutil.rmtree(self.w, ignore_errors=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kills", type=int, default=30)
    p.add_argument("--seed", type=int, default=int(time.time()))
    p.add_argument("--gap", type=float, nargs=2, default=[3.0, 9.0], metavar=("MIN", "MAX"),
                   help="seconds between kills (uniform)")
    p.add_argument("--size", type=int, default=200000, help="doubles per checkpoint (ictest N)")
    p.add_argument("--sleep-ms", type=int, default=1000, help="per iteration: one async commit each")
    p.add_argument("--nodes", type=int, default=2, help="checkpoint nodes (managers)")
    p.add_argument("--final-iters", type=int, default=3000,
                   help="iteration the completion run ends at (>= iterations reached)")
    p.add_argument("--sequence", default="", help="comma list of targets instead of random ones")
    p.add_argument("--keep", action="store_true", help="keep the work directory")
    p.add_argument("--json", default="", help="also write the counts here")
    a = p.parse_args()
    if a.kills < 0 or a.size < 1 or a.sleep_ms < 0 or a.nodes < 1 or a.gap[0] < 0 or a.gap[1] < a.gap[0]:
        p.error("--kills >= 0, --size >= 1, --sleep-ms >= 0, --nodes >= 1, 0 <= gap MIN <= MAX")
    c = Campaign(a)
    try:
        counts = c.run()
    finally:
        c.close()
    if counts.get("restores", 0) and max(c.hashes, default=0) > a.final_iters:
        counts["final_result_matches"] = 0
    print("SUMMARY " + " ".join(f"{k}={v}" for k, v in counts.items()), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(counts, f, indent=1)
    bad = counts["losses"] or counts["corrupt"] or not counts["final_result_matches"]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
