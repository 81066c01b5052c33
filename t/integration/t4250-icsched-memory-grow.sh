#!/usr/bin/env bash
# iCheck grows when its node's checkpoint memory runs short [John24 §7.3.1.2,
# Alg. 8, 9]: 4 local nodes, n4 iCheck's boot node offering 60 MB of
# checkpoint memory (vcluster-boot --icheck-mem-gb 0.06: icheckd
# --mem-limit-gb), max_nodes 2, scaler every second, favour icheck.
#
#  1. the manager writes the node's budget file; an application committing
#     56 MiB versions fits once (one version, 58.7 MB of 60), the next
#     version does not fit beside it: the agent refuses it ("nomem") and the
#     application writes it to the second level itself (mode=direct);
#  2. the controller's proactive scaler sees n4 above 90 % and depleting and
#     sends a HIGH request; mjsched lends idle n1 (NEW_NODES), the controller
#     starts its manager there: mjstat -N shows n1 "icheck" (partition icheck
#     in --json), n4 as iCheck's boot node;
#  3. the application's next try for agents lands on n1 (most free memory):
#     its commits go through agents again (mode=rdma), through its agent on
#     n1 (a version recorded while that agent was the application's newest);
#     every such try stops the set that refused and places a new one where
#     memory is free (n4 again once its agent stopped), so which node holds
#     the agents at a later moment is not a property of the run;
#  4. no agent's flush fails: a version the application wrote itself
#     supersedes the one its refusing agent still had to write (the
#     application's retention removes that unfinished directory);
#  5. mjstat --history lists the request, grant and node_up events.
# About 25 s.
. "${DYNRES_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}/t/lib.sh"
t_begin 120
t_require icheckd icagent synth stdbuf

C=$T_TMP/cluster
W=$T_TMP/work
mkdir -p "$W"
cd "$W" || t_fatal "cd $W"
boot_cluster "$C" 4 --tick 0.2 --kill-wait 1 --icheck-nodes 1 --icheck-max-nodes 2 --icheck-mem-gb 0.06 \
  --icheck-scaler-interval 1
show_logs() {
  echo "--- controller (tail)" >&2; tail -n 15 "$C/icheck/controller.log" >&2
  echo "--- application (tail)" >&2; tail -n 15 "$W/app.out" >&2
}
t_on_fail show_logs
icsched_helpers "$C"

assert_eq 60000000 "$(cat "$C/icheck/manager-n4.budget" 2>/dev/null)" "n4's manager offers 60 MB (budget file)"
stdbuf -oL "$DYNRES_BIN/synth" -s cp_size=56MiB -s cp_type=binary -s cp_interval=2it -s cp_count=100000000 \
  -s probe_interval=0 -s persist=false -s app_name=grow -s icheck_config="$C/icheck.yaml" -s mpiio_file="$W/m" \
  >"$W/app.out" 2>&1 &
APP=$!
bg_register "$APP"
wait_for 20 "the first version goes to an agent on n4" eval 'grep -q "^synth: commit .*version=1 .*mode=rdma" "$W/app.out"'
wait_for 20 "a version that does not fit is written by the application itself" \
  eval 'grep -q "^synth: commit .*mode=direct" "$W/app.out"'
assert_contains "$(cat "$C"/icheck/agent-*.log 2>/dev/null)" "checkpoint memory left on this node" \
  "the agent refused the piece for the node's checkpoint memory"
wait_for 30 "iCheck borrowed n1 (NEW_NODES answered)" eval '[[ $(lent) == "n1:held" ]]'
assert_contains "$(cat "$C/icheck/controller.log")" "urgency HIGH (node n4)" "the scaler asked HIGH for n4"
t_run mjstat -N
assert_match 'n1 +icheck +[0-9]+ +- ' "$T_OUT" "mjstat -N: n1 is iCheck's"
assert_match 'n4 +icheck +- +- ' "$T_OUT" "mjstat -N: n4 is iCheck's boot node"
assert_match 'n2 +idle ' "$T_OUT" "mjstat -N: n2 is idle"
t_run mjstat -N --json
P=$(perl -MJSON::PP -0777 -ne 'my $d = decode_json($_); print join(" ", map { "$_->{name}=$_->{partition}:$_->{state}" } @{$d->{nodes}})' <<<"$T_OUT")
assert_eq "n1=icheck:icheck n2=batch:idle n3=batch:idle n4=icheck:icheck" "$P" "mjstat -N --json: partitions and states"
# rdma versions recorded while the application's first agent on n1 was its
# newest agent (from its start to the start of the next one)
on_n1() {
  sq "$C" "WITH g AS (SELECT id FROM icheck_apps WHERE name = 'grow'),
                a AS (SELECT MIN(started) AS t FROM icheck_agents WHERE app_id IN g AND node = 'n1'),
                b AS (SELECT MIN(started) AS t FROM icheck_agents WHERE app_id IN g AND started > (SELECT t FROM a))
           SELECT COUNT(*) FROM icheck_versions WHERE app_id IN g AND mode = 'rdma'
             AND time > (SELECT t FROM a) AND time < COALESCE((SELECT t FROM b), 1e18)"
}
wait_for 40 "commits go through the application's agent on n1 after the growth" eval '(( $(on_n1) >= 1 ))'
assert_not_contains "$(cat "$C/icheck/controller.log")" "flush on node" "no agent's flush failed"
t_run mjstat --history
assert_match 'request +HIGH 1 node\(s\)' "$T_OUT" "mjstat --history: the request"
assert_match 'grant +n1' "$T_OUT" "mjstat --history: the grant"
assert_match 'node_up +n1' "$T_OUT" "mjstat --history: n1 up"
{ kill -9 "$APP"; wait "$APP"; } 2>/dev/null
t_done
