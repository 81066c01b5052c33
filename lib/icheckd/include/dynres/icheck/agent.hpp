// iCheck agent [John24 §6.1.1.1, §6.2, §6.2.3, §6.2.5]: serves the
// processes of ONE application (identity: app name + uid), moves checkpoint
// data by libfabric RMA, keeps versions in memory and writes the second level.
//
// Control protocol (JSON frames, see wire.hpp), one connection per "slot"
// (an MPI rank for MR, a node leader for SHMR):
//   hello    {app, uid, slot, nslots, nagents, agent_index, nranks, peers[], provider, addr}
//            -> {addr, provider, versions:[...]}        peers = control addresses of all agents
//   begin    {v, total, regions[], mode:"pull"|"push", key, base}
//            -> push: {key, base} of the agent piece buffer
//   chunk    {buf_off, data_off, len}   pull: agent fi_reads library buffer -> piece
//   end      {v, sums}  piece complete (all bytes present); sums = the
//                 library's XXH3_64 of each region (begin's order), kept as
//                 the region's "xxh3" (versions/rbegin return it); checked
//                 again before the second-level write (a damaged copy is
//                 refused: "corrupt: ...")
//   publish  {v}  every agent of the app holds v complete: v becomes current,
//                 older versions of the slot are dropped (§6.2.3.2)
//   versions {}   -> {versions:[{v, current, total, regions}]}
//                 (hello also returns app_versions: [{v, nranks}] of every
//                 slot of the application, newest first)
//   held     {v, verify}  -> {pieces:[{slot, total, regions}]}: the pieces of
//                 v in every slot; verify = check each region's xxh3 first
//                 ("corrupt: ..."). A redistributing restore [John24 §7.4.4]
//                 reads byte ranges of the old ranks' pieces with rbegin+slot.
//   rbegin   {v, mode, key, base, slot?} -> {total, regions, key, base}
//                 (slot: another slot of the application, default the own)
//   rchunk   {buf_off, data_off, len}   pull: agent fi_writes piece -> library buffer
//   flush    {timeout_ms}  write the current version to the second level now;
//                 ok only once its manifest is durable (agent 0 waits for
//                 every agent's part), else {error} after timeout_ms
//                 (default 120000)
//   stats    {}   -> {ncops, bytes, seconds, last_op, mem_bytes, slots, rss,
//                        lazy_free, spare_bytes, recycled, pulls, pushes}
//                        (bytes; lazy_free = part of rss the kernel may reclaim:
//                        idle spare buffers; recycled = buffers reused;
//                        pulls/pushes = commits begun per technique)
//   shutdown {flush}
//   part     {v, index, part, timeout_ms}  sealed ckstore part from a peer
//                 agent (to agent 0); replied once the manifest is written,
//                 or at once with "superseded: agent 0 skipped vN ..." when
//                 agent 0's own part of v can no longer come (its writer
//                 moved on to a newer version) or "io: ..." when it failed
//   test_corrupt {v}  only with ICHECK_AGENT_TEST_OPS=1 in the agent's
//                 environment (tests): flip one bit of every piece of v
// Connections are authenticated on their own thread (never on the accept
// loop), at most 16 pending per TCP peer host, 4096 connections in all.
// Every reply is {ok:true,...} or {error:"..."}. Every integer field is
// checked: a non-negative JSON integer in range ("invalid: field ..."
// otherwise); chunk/rchunk ranges and the regions of a begin must lie inside
// the piece (overflow-safe); a begin larger than max_bytes or the node's
// available memory is refused with "nomem: ..." before allocating.
//
// Second level: when all slots of this agent published v and v is on the
// schedule (pfs_every), the agent writes its regions with ckstore and seals
// its part; agent 0 collects all agents' parts and writes the manifest, so a
// version becomes valid on disk only when all agents aligned on it. Each
// agent has one writer; a write not yet started is dropped when a newer
// version is queued (a slow file system never pins one buffer set per
// commit), so agent 0 may skip a version a peer wrote: the peer is told at
// once (see "part"), never left waiting for a manifest that cannot come.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

namespace dynres::icheck {

struct AgentOptions {
  std::string listen;          ///< control address ("unix:/..." or "host:0")
  std::string id = "a0";       ///< agent id (controller-assigned)
  std::string app;             ///< application name served
  uint32_t uid = 0;            ///< owner uid of the application
  std::string pfs_dir;         ///< second-level root ("" = no second level)
  std::string provider = "auto";
  std::string fabric_node;     ///< tcp source address
  bool multi_level = true;
  int pfs_every = 1;
  double compress_threshold_mb = 1024;
  int keep_versions = 2;
  std::string ready_file;      ///< if set: write the bound address here when ready
  bool print_ready = true;     ///< print "READY <addr>" on stdout when ready
  /// Double buffering (§6.2.3.2): keep the buffer of a superseded version
  /// and reuse it (already faulted in and registered) for the slot's next
  /// commit. Between commits the idle spare is handed to the kernel with
  /// MADV_FREE: it stays mapped (and counted in VmRSS as LazyFree) but is
  /// reclaimed without I/O when memory is short, so the memory the agent
  /// really holds is one checkpoint per slot. false frees superseded
  /// versions immediately (every commit then maps and faults fresh memory).
  bool recycle = true;
  /// Stop when the process that started the agent exits (checked every
  /// 200 ms): managers and benchmarks set it so that agents never outlive
  /// them as orphans.
  bool exit_with_parent = false;
  /// Largest checkpoint piece (bytes) one `begin` may ask this agent to
  /// hold; 0 = no fixed limit (the node's MemAvailable still applies).
  /// Larger requests are refused with "nomem: ..." before any allocation.
  uint64_t max_bytes = 0;
  /// The node's checkpoint memory left, as its manager counted it at its last
  /// heartbeat (a file holding one number of bytes, written by the manager
  /// when started with --mem-limit-gb); "" = no node budget. A piece larger
  /// than that budget minus what this agent took since the file last changed
  /// is refused with "nomem: ..." like one above MemAvailable.
  std::string node_budget_file;
};

/// Run the agent until a shutdown request or *stop becomes true. Returns 0 on
/// a clean stop; throws on setup errors (bind, fabric).
int run_agent(const AgentOptions& opt, std::atomic<bool>* stop = nullptr);

}  // namespace dynres::icheck
