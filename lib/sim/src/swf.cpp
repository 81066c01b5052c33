// Standard Workload Format traces (Chapin et al., "Benchmarks and standards
// for the evaluation of parallel job schedulers", JSSPP 1999; the Parallel
// Workloads Archive's 18-field format). Rules in sim.hpp read_swf(). Plain or
// gzip-compressed (the Archive ships .swf.gz): zlib's gzread reads both.
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "dynres/sim.hpp"

namespace dynres::sim {

namespace {
/// Parse a whole decimal number (SWF fields are integers; -1 means unknown).
bool parse_num(const std::string& s, double& v) {
  errno = 0;
  char* end = nullptr;
  v = std::strtod(s.c_str(), &end);
  return errno == 0 && end && *end == 0 && std::isfinite(v);
}

constexpr size_t kMaxLine = 4096;  // 18 numbers fit in a few hundred bytes

/// Lines of a plain or gzip file (zlib reads an uncompressed file as it is).
class LineReader {
 public:
  explicit LineReader(const std::string& path) : path_(path), gz_(gzopen(path.c_str(), "rb"), &gzclose) {
    if (!gz_) throw std::runtime_error(path + ": cannot read the trace: " + std::strerror(errno ? errno : ENOMEM));
    gzbuffer(gz_.get(), 1 << 17);
  }
  /// The next line without its newline; false at the end. Throws on a line
  /// longer than kMaxLine (lineno is the line's number) or a read/decompression error.
  bool next(std::string& line, size_t lineno) {
    line.clear();
    char buf[kMaxLine + 2];
    for (;;) {
      if (!gzgets(gz_.get(), buf, sizeof buf)) {
        check_error();
        return !line.empty();
      }
      size_t n = std::strlen(buf);
      bool eol = n > 0 && buf[n - 1] == '\n';
      line.append(buf, eol ? n - 1 : n);
      if (line.size() > kMaxLine)
        throw std::runtime_error(path_ + ":" + std::to_string(lineno) + ": line longer than 4096 bytes");
      if (eol) return true;
    }
  }

 private:
  void check_error() {
    int err = Z_OK;
    const char* msg = gzerror(gz_.get(), &err);
    if (err == Z_ERRNO) throw std::runtime_error(path_ + ": read error: " + std::strerror(errno));
    if (err != Z_OK && err != Z_STREAM_END)
      throw std::runtime_error(path_ + ": not a valid gzip file: " + (msg ? msg : "zlib error"));
  }
  std::string path_;
  std::unique_ptr<gzFile_s, int (*)(gzFile)> gz_;
};
}  // namespace

SwfTrace read_swf(const std::string& path, int ppn, int nodes) {
  if (ppn < 1) throw std::invalid_argument("procs per node must be >= 1");
  LineReader in(path);
  SwfTrace tr;
  int header_nodes = 0, header_procs = 0;
  std::string line;
  size_t lineno = 0;
  std::vector<SimJob> all;
  while (in.next(line, lineno + 1)) {
    ++lineno;
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    if (line[b] == ';') {
      int v = 0;
      if (std::sscanf(line.c_str() + b, "; MaxNodes: %d", &v) == 1) header_nodes = v;
      else if (std::sscanf(line.c_str() + b, "; MaxProcs: %d", &v) == 1) header_procs = v;
      continue;
    }
    std::istringstream fs(line);
    std::vector<double> f;
    std::string tok;
    while (fs >> tok) {
      double v;
      if (!parse_num(tok, v)) {
        std::string shown = tok.substr(0, 40);  // printable: a NUL would cut the message short
        for (char& ch : shown)
          if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
        throw std::runtime_error(path + ":" + std::to_string(lineno) + ": field " + std::to_string(f.size() + 1) +
                                 " is not a number: '" + shown + "'");
      }
      f.push_back(v);
    }
    if (f.size() < 9)
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": expected 18 fields (at least 9), found " +
                               std::to_string(f.size()));
    double id = f[0], submit = f[1], run = f[3], alloc = f[4], req_procs = f.size() > 7 ? f[7] : -1, req_time = f[8];
    double procs = alloc > 0 ? alloc : req_procs;
    if (!(id >= 0) || id > 9e15 || !(submit >= 0))
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": bad job id or submit time");
    if (submit > kMaxSimTime || run > kMaxSimTime || req_time > kMaxSimTime)
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": submit, run or requested time above " +
                               std::to_string(static_cast<int64_t>(kMaxSimTime)) +
                               " s, beyond what the simulator can represent");
    if (run < 0 || !(procs > 0) || procs > 1e9) {
      ++tr.dropped_invalid;
      continue;
    }
    SimJob j;
    j.id = static_cast<int64_t>(id);
    j.name = "swf-" + std::to_string(j.id);
    j.submit = submit;
    j.req_nodes = j.min_nodes = j.max_nodes = j.limit_nodes =
        static_cast<int>((static_cast<int64_t>(procs) + ppn - 1) / ppn);
    j.runtime = run;
    j.time_limit = req_time > 0 ? std::max(req_time, run) : run;
    all.push_back(std::move(j));
  }
  tr.max_nodes = header_nodes > 0 ? header_nodes : header_procs > 0 ? header_procs / ppn : 0;
  const int machine = nodes > 0 ? nodes : tr.max_nodes;
  for (auto& j : all) {
    if (machine > 0 && j.req_nodes > machine) {
      ++tr.dropped_too_large;
      continue;
    }
    tr.jobs.push_back(std::move(j));
  }
  return tr;
}

}  // namespace dynres::sim
