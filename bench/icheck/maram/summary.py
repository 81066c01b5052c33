#!/usr/bin/env python3
"""Tables and plot of bench/icheck/maram/run.sh (commits.csv -> stdout, maram.png).

Per checkpoint size (growing, fixed) and step (node count): the median commit
time over repetitions and over the steady commits of a run (commit 2 on), the
first commit after a resize apart (it opens the connections to new agents),
for MA-RA, MA-MA and the same-run baselines (MPI-IO, write+fsync of the same
bytes); MA-MA's gain over MA-RA as the dissertation states it,
(t_MA-RA / t_MA-MA - 1) x 100 % [John24 §9.4.2].
"""
import csv
import os
import statistics
import subprocess
import sys
from collections import defaultdict


def main(path, out):
    rows = list(csv.DictReader(open(path)))
    steady = defaultdict(list)   # (size, step, what) -> seconds of commits >= 2
    first = defaultdict(list)    # (size, step, what) -> seconds of commit 1
    seq = defaultdict(list)      # (size, what, step, commit) -> seconds (per rep)
    meta = {}                    # (size, step) -> (nodes, bytes)
    agents = defaultdict(set)    # (size, step, what) -> agent counts seen
    for r in rows:
        k = (r["size"], int(r["step"]), r["what"])
        s = float(r["seconds"])
        (first if int(r["commit"]) == 1 else steady)[k].append(s)
        seq[(r["size"], r["what"], int(r["step"]), int(r["commit"]))].append(s)
        meta[(r["size"], int(r["step"]))] = (int(r["nodes"]), int(r["bytes"]))
        if r["what"] in ("mara", "mama"):
            agents[k].add(int(r["agents"]))
    med = lambda v: statistics.median(v) if v else float("nan")
    gains = {"growing": [], "fixed": []}
    for size in ("growing", "fixed"):
        steps = sorted(s for (z, s) in meta if z == size)
        if not steps:
            continue
        print(f"\n## {size} checkpoint size: median commit time, seconds (commits 2-4 of each run)")
        print(f"{'step':>4} {'nodes':>5} {'MiB':>6} {'agents RA/MA':>12} {'MA-RA':>8} {'MA-MA':>8} {'MA-MA gain':>10}"
              f" {'MPI-IO':>8} {'wr+fsync':>8} {'RA/fsync':>8} {'MA/fsync':>8} {'1st RA':>7} {'1st MA':>7}")
        for st in steps:
            n, b = meta[(size, st)]
            ra, ma = med(steady[(size, st, "mara")]), med(steady[(size, st, "mama")])
            mp, fs = med(steady[(size, st, "mpiio")]), med(steady[(size, st, "fsync")])
            g = (ra / ma - 1) * 100 if ma > 0 else float("nan")
            gains[size].append(g)
            ag = "/".join(",".join(str(x) for x in sorted(agents[(size, st, w)])) for w in ("mara", "mama"))
            print(f"{st:>4} {n:>5} {b / 1048576:>6.0f} {ag:>12} {ra:>8.4f} {ma:>8.4f} {g:>9.0f}%"
                  f" {mp:>8.4f} {fs:>8.4f} {ra / fs:>8.2f} {ma / fs:>8.2f}"
                  f" {med(first[(size, st, 'mara')]):>7.4f} {med(first[(size, st, 'mama')]):>7.4f}")
        if gains[size]:
            print(f"MA-MA gain over MA-RA, {size}: {min(gains[size]):.0f}% .. {max(gains[size]):.0f}% "
                  f"(dissertation: {'58-110 %' if size == 'growing' else 'up to 20 %'})")
    # plot: every commit in sequence, medians over repetitions
    dat = os.path.join(out, "maram.dat")
    with open(dat, "w") as f:
        for size in ("growing", "fixed"):
            for what in ("mara", "mama", "mpiio", "fsync"):
                f.write(f"# {size} {what}\n")
                keys = sorted(k for k in seq if k[0] == size and k[1] == what)
                for i, k in enumerate(keys):
                    n = meta[(size, k[2])][0]
                    f.write(f"{i + 1} {med(seq[k]):.6f} {n}\n")
                f.write("\n\n")
    png = os.path.join(out, "maram.png")
    gp = f"""set terminal pngcairo size 1200,480 font ',10'
set output '{png}'
set multiplot layout 1,2 title 'MA-RA vs MA-MA: commit time per commit (synth, nodes 1-2-4-8-4-2, medians over repetitions)'
set xlabel 'commit (4 per node count)'
set ylabel 'seconds'
set logscale y
set key top left
set grid
set title 'checkpoint grows with the nodes'
plot '{dat}' index 0 using 1:2 with linespoints title 'MA-RA (1 agent)', \\
     '' index 1 using 1:2 with linespoints title 'MA-MA (agents = nodes)', \\
     '' index 2 using 1:2 with lines dt 2 title 'MPI-IO + sync', \\
     '' index 3 using 1:2 with lines dt 3 title 'write + fsync'
set title 'fixed checkpoint size'
plot '{dat}' index 4 using 1:2 with linespoints title 'MA-RA (1 agent)', \\
     '' index 5 using 1:2 with linespoints title 'MA-MA (agents = nodes)', \\
     '' index 6 using 1:2 with lines dt 2 title 'MPI-IO + sync', \\
     '' index 7 using 1:2 with lines dt 3 title 'write + fsync'
unset multiplot
"""
    try:
        subprocess.run(["gnuplot"], input=gp.encode(), check=True)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"maram: no plot ({e})", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: summary.py commits.csv OUTDIR")
    main(sys.argv[1], sys.argv[2])
