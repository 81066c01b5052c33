#!/usr/bin/env python3
"""Compare jobs submitted held to Slurm (scontrol show job -o) and to dynres
(mjcontrol show job --json), field by field, for t/integration/t1025-cli-sbatch-conformance.sh.

usage: compare.py RESULTS SLURM_SHOW MJ_SHOW ALLOW [--report FILE]

RESULTS: one line per script, tab-separated: name, sbatch exit code, Slurm job
id, mjsub exit code, dynres job id, Slurm's base job id, dynres's base job id
(the job the dependency scripts name).  ALLOW: "script field reason" lines
(field "accept" = accepted by one only); '#' starts a comment.
Prints one line per script and per difference; exits 1 when a difference is
not allowed or an allow-list entry is not used (the list stays small and true).
"""
import json
import re
import sys
from datetime import datetime


def expand_indices(spec):
    """Slurm's ArrayTaskId ("0-5%2", "1,3,7", "1-9:2") -> (sorted indices, limit)."""
    limit = 0
    if "%" in spec:
        spec, lim = spec.split("%")
        limit = int(lim)
    out = set()
    for part in spec.split(","):
        step = 1
        if ":" in part:
            part, st = part.split(":")
            step = int(st)
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1, step))
    return sorted(out), limit


def sub_id(path, jid):
    """The job id in a path (a whole number, not part of a longer word) as %J."""
    return re.sub(r"(?<![0-9A-Za-z])%s(?![0-9A-Za-z])" % jid, "%J", path)


def slurm_fields(line, sid, base):
    # values may hold spaces (JobName): a value runs up to the next " Key="
    kv = dict(f.split("=", 1) for f in re.split(r" (?=[A-Za-z][A-Za-z/:_.]*=)", line.strip()) if "=" in f)
    def path(p):
        return sub_id(p.replace("_4294967294", "_%a"), sid)
    nodes = kv["NumNodes"]
    lo, _, hi = nodes.partition("-")
    mem = ("cpu:" + kv["MinMemoryCPU"].rstrip("M")) if "MinMemoryCPU" in kv else \
          ("node:" + kv.get("MinMemoryNode", "0").rstrip("M"))
    dep = kv.get("Dependency", "(null)")
    dep = "" if dep == "(null)" else re.sub(r"\([a-z]+\)", "", dep).replace(str(base), "BASE")
    begin = kv.get("EligibleTime", "Unknown")
    f = {
        "name": kv["JobName"],
        "nodes": lo if (not hi or hi == lo) else lo + "-" + hi,
        "tasks": kv["NumTasks"],
        "cpus_per_task": kv["CPUs/Task"],
        "memory": mem,
        "time_limit": kv["TimeLimit"],
        "stdout": path(kv["StdOut"]),
        "stderr": path(kv["StdErr"]),
        "dependency": dep,
        "begin": "" if begin == "Unknown" else begin,
    }
    if "ArrayTaskId" in kv:
        idx, lim = expand_indices(kv["ArrayTaskId"])
        f["array"] = ",".join(map(str, idx)) + ("%" + str(lim) if lim else "")
    return f


def fmt_limit(s):
    if s < 0:
        return "UNLIMITED"
    d, r = divmod(s, 86400)
    h, r = divmod(r, 3600)
    m, sec = divmod(r, 60)
    return (f"{d}-" if d else "") + f"{h:02d}:{m:02d}:{sec:02d}"


def mj_fields(j, tasks_of_array, base):
    jid = j["array_job_id"] or j["job_id"]
    def path(p):
        if j["array_job_id"] is not None:
            p = p.replace(f"{jid}_{j['array_task_id']}", f"{jid}_%a")
        return sub_id(p, jid)
    if j["kind"] == "rigid":
        nodes = str(j["nodes_requested"])
    else:
        nodes = f"{j['min_nodes']}-{j['max_nodes']}"
    mem = f"cpu:{j['mem_per_cpu_mb']}" if j.get("mem_per_cpu_mb") else f"node:{j.get('mem_per_node_mb') or 0}"
    dep = re.sub(r"\b%s\b" % base, "BASE", j["dependency"]) if j["dependency"] else ""
    begin = ""
    if j["begin_time"] is not None:
        begin = datetime.fromtimestamp(j["begin_time"]).strftime("%Y-%m-%dT%H:%M:%S")
    f = {
        "name": j["name"],
        "nodes": nodes,
        "tasks": str(j["ntasks"]),
        "cpus_per_task": str(j["cpus_per_task"]),
        "memory": mem,
        "time_limit": fmt_limit(j["time_limit_s"]),
        "stdout": path(j["stdout"]),
        "stderr": path(j["stderr"]),
        "dependency": dep,
        "begin": begin,
    }
    if j["array_job_id"] is not None:
        idx = sorted(tasks_of_array[jid])
        f["array"] = ",".join(map(str, idx)) + ("%" + str(j["array_max"]) if j["array_max"] else "")
    return f


def same(field, a, b):
    if field == "begin" and a and b:  # relative begin times: submitted a moment apart
        ta = datetime.strptime(a, "%Y-%m-%dT%H:%M:%S")
        tb = datetime.strptime(b, "%Y-%m-%dT%H:%M:%S")
        return abs((ta - tb).total_seconds()) <= 5
    return a == b


def main():
    results, slurm_show, mj_show, allow_file = sys.argv[1:5]
    report = sys.argv[sys.argv.index("--report") + 1] if "--report" in sys.argv else None
    slurm = {}
    for line in open(slurm_show):
        m = re.match(r"JobId=(\d+) ", line)
        if m and int(m.group(1)) not in slurm:
            slurm[int(m.group(1))] = line
    mj, tasks_of_array = {}, {}
    text, dec, pos = open(mj_show).read(), json.JSONDecoder(), 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        j, pos = dec.raw_decode(text, pos)
        mj[j["job_id"]] = j
        if j["array_job_id"] is not None:
            tasks_of_array.setdefault(j["array_job_id"], []).append(j["array_task_id"])
    allow = {}
    for line in open(allow_file):
        line = line.split("#", 1)[0].strip()
        if line:
            script, field, reason = line.split(None, 2)
            allow[(script, field)] = reason
    used, out, bad = set(), [], 0

    def judge(key, prefix, what):  # one difference: allowed (with its reason) or counted
        nonlocal bad
        if key in allow:
            used.add(key)
            return f"{prefix}{what} (allowed: {allow[key]})"
        bad += 1
        return f"{prefix}DIFFERENCE {what}"

    n = both = identical = slurm_only = mj_only = neither = 0
    for line in open(results):
        name, src, sid, mrc, mid, sbase, mbase = line.rstrip("\n").split("\t")
        n += 1
        s_ok, m_ok = src == "0", mrc == "0"
        if s_ok != m_ok:
            key = (name, "accept")
            who = "Slurm only" if s_ok else "dynres only"
            slurm_only += s_ok
            mj_only += m_ok
            out.append(judge(key, f"{name}: ", f"accepted by {who}"))
            continue
        if not s_ok:
            neither += 1
            out.append(f"{name}: refused by both")
            continue
        both += 1
        sf = slurm_fields(slurm[int(sid)], int(sid), sbase)
        mf = mj_fields(mj[int(mid)], tasks_of_array, mbase)
        diffs = []
        for field in sf:
            if not same(field, sf[field], mf.get(field, "")):
                diffs.append(judge((name, field), f"  {field}: ", f"Slurm '{sf[field]}' dynres '{mf.get(field, '')}'"))
        if diffs:
            out.append(f"{name}: accepted by both, {len(diffs)} field(s) differ")
            out.extend(diffs)
        else:
            identical += 1
            out.append(f"{name}: identical")
    for key in sorted(set(allow) - used):
        bad += 1
        out.append(f"allow-list entry not used (remove it): {key[0]} {key[1]}")
    accepted_by_slurm = both + slurm_only
    summary = (f"{n} scripts: accepted by both {both}, refused by both {neither}, Slurm only {slurm_only}, "
               f"dynres only {mj_only}; identical {identical} of {both}; "
               f"of the {accepted_by_slurm} Slurm accepts, dynres accepts {both} "
               f"({100.0 * both / max(1, accepted_by_slurm):.1f} %) and resolves {identical} identically "
               f"({100.0 * identical / max(1, accepted_by_slurm):.1f} %); unexplained differences {bad}")
    out.append(summary)
    print("\n".join(out))
    if report:
        open(report, "w").write("\n".join(out) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
