// The target table and the helpers the entry functions share.
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common.hpp"
#include "dynres/fuzz.hpp"

namespace dynres::fuzz {

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {
      {"frame_reader", frame_reader, "lib/proto FrameReader: frames taken from a socket in pieces"},
      {"resize_msg", resize_msg, "lib/schedd ResizeServer: a job connection's messages (mj_register ... mj_commit)"},
      {"icheck_wire", icheck_wire, "iCheck control channel: TCP auth frame, then recv_msg"},
      {"jobspec", jobspec, "lib/jobspec: #SBATCH/#MJ directives parsed, applied and resolved"},
      {"swf", swf, "lib/sim read_swf and a short FCFS simulation of the trace"},
      {"config", config, "YAML loaders: dynres.yaml, power model, icheck.yaml, icheck-dynamic.yaml"},
  };
  return t;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path + ": cannot read");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace detail {

namespace {
std::string g_dir;
void remove_dir() {
  std::error_code ec;
  if (!g_dir.empty()) std::filesystem::remove_all(g_dir, ec);
}
}  // namespace

const std::string& work_dir() {
  if (g_dir.empty()) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dynres-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp: cannot create a work directory");
    g_dir = tmpl;
    std::atexit(remove_dir);
  }
  return g_dir;
}

std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  std::string p = work_dir() + "/" + name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) throw std::runtime_error(p + ": cannot write");
  return p;
}

void require(bool ok, const std::string& what) {
  if (!ok) throw Violation(what);
}

void require_named(const std::exception& e, const std::string& name, const std::string& where) {
  std::string m = e.what();
  require(m.find(name) != std::string::npos, where + ": the error does not name " + name + ": " + m.substr(0, 300));
  // a bare conversion name ("stoi", "stod") is the standard library's, not a message
  for (const char* bare : {"stoi", "stol", "stoll", "stoul", "stod", "stof"}) {
    auto tail = m.substr(m.size() >= std::string(bare).size() ? m.size() - std::string(bare).size() : 0);
    require(!(tail == bare), where + ": the error ends in the bare '" + bare + "': " + m.substr(0, 300));
  }
}

}  // namespace detail
}  // namespace dynres::fuzz
