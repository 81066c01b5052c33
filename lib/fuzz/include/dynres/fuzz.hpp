// Fuzz entry functions: one per input surface of dynres that reads bytes a
// user or a peer controls. Each takes an arbitrary byte string, drives the
// real entry point of its module with it (sockets where the module reads
// sockets, files where it reads files) and checks the module's contract on
// bad input: only the documented error, with a message naming the problem.
//
// The same functions run under libFuzzer (lib/fuzz/targets, built with
// -DDYNRES_FUZZ=ON and clang; bench/fuzz/run.sh) and, in the normal build,
// in unit_fuzz, which replays every input kept under t/fuzz/<target>/ (seed
// inputs and the inputs of bugs found, as regression tests).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace dynres::fuzz {

/// A broken contract found by an entry function (an undocumented exception,
/// an error message that names nothing, a frame returned that was never
/// sent). libFuzzer reports it as a crash; unit_fuzz as a failure.
class Violation : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

using Entry = void (*)(const uint8_t* data, size_t size);

struct Target {
  const char* name;  ///< also the directory t/fuzz/<name>/ of its inputs
  Entry run;
  const char* what;  ///< one line: the surface it drives
};

/// Every target, in the order bench/fuzz/run.sh runs them.
const std::vector<Target>& targets();

/// lib/proto FrameReader over a real socket pair: the bytes arrive in
/// pieces, frames are taken out as they complete; the reader must only
/// return whole frames or throw ProtoError.
void frame_reader(const uint8_t* data, size_t size);
/// mjsched's resize-protocol handler (lib/schedd ResizeServer) with a real
/// state file and a job connection (socket pair): input lines are framed
/// as messages after mj_hello; byte 0 chooses whether orders are
/// outstanding first.
void resize_msg(const uint8_t* data, size_t size);
/// The iCheck control channel (dynres/icheck/wire.hpp): a TCP connection
/// authenticated as icheckd does it (MUNGE auth frame, ICHECK_TCP_AUTH=none
/// when byte 0 is odd), then recv_msg until the stream ends.
void icheck_wire(const uint8_t* data, size_t size);
/// A job script's #SBATCH/#MJ directives (lib/jobspec): parse, apply and
/// resolve on a 16-node cluster; only SpecError may come out.
void jobspec(const uint8_t* data, size_t size);
/// The SWF reader of mjsim (lib/sim read_swf) on a file of these bytes;
/// only std::runtime_error "FILE:LINE: ..." / "FILE: ..." may come out.
void swf(const uint8_t* data, size_t size);
/// The YAML loaders (dynres.yaml: load_config; power model:
/// load_power_model; icheck.yaml: load_static, load_dynamic) on a file of
/// these bytes; errors must name the file.
void config(const uint8_t* data, size_t size);

/// The bytes of a file (for replaying kept inputs). Throws std::runtime_error.
std::string read_file(const std::string& path);

}  // namespace dynres::fuzz
