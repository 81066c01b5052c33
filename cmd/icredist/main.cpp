// icredist — inspect, verify, redistribute and export iCheck's second-level
// checkpoints offline; see icredist(1). Logic in lib/icredist.
// Exit: 0 ok, 1 verify found a bad chunk / operation failed, 2 bad input.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iostream>
#include <map>
#include <sstream>

#include "dynres/icredist.hpp"

namespace ir = dynres::icredist;
namespace ck = dynres::ckstore;

namespace {

std::string when(std::int64_t t) {
  char b[32];
  std::time_t x = t;
  std::tm tm{};
  ::localtime_r(&x, &tm);
  std::strftime(b, sizeof b, "%Y-%m-%dT%H:%M:%S", &tm);
  return b;
}

std::string human(std::uint64_t b) {
  const char* u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double x = double(b);
  int i = 0;
  while (x >= 1024 && i < 4) x /= 1024, ++i;
  char s[32];
  std::snprintf(s, sizeof s, i ? "%.1f %s" : "%.0f %s", x, u[i]);
  return s;
}

/// "OFF:COUNT,OFF:COUNT,..." -> offsets/counts; "2x3" -> dims.
std::uint64_t num(const std::string& s, const std::string& what) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19)
    throw ir::Error(what + ": '" + s + "' is not a non-negative integer");
  return std::stoull(s);
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}
std::pair<std::string, std::string> split_eq(const std::string& s, const char* opt) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw ir::Error(std::string(opt) + " wants LABEL=..., got '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli{"icredist: inspect, verify, redistribute (N -> M ranks) and export iCheck second-level checkpoints"};
  cli.require_subcommand(1);
  std::string root;
  std::uint32_t uid = std::uint32_t(::geteuid());
  cli.add_option("--pfs-dir", root, "second-level checkpoint directory (icheck.yaml pfs_dir)")->required();
  cli.add_option("--uid", uid, "uid whose checkpoints to read (default: own)");

  bool json_out = false;
  std::string app, label, out, format;
  std::uint64_t version = 0;
  int to = 0, rank = 0;
  std::vector<std::string> layouts, grids;

  auto* ls = cli.add_subcommand("ls", "list applications and versions (size, ranks, time, compression)");
  ls->add_option("app", app, "only this application");
  ls->add_flag("--json", json_out, "JSON output");
  auto* show = cli.add_subcommand("show", "one version's objects (labels), roles and distributions");
  show->add_option("app", app, "application")->required();
  show->add_option("-v,--version", version, "version (default: newest complete)");
  show->add_flag("--json", json_out, "JSON output");
  auto* verify = cli.add_subcommand("verify", "check every chunk's checksums (exit 1 naming the first bad chunk)");
  verify->add_option("app", app, "application")->required();
  verify->add_option("-v,--version", version, "only this version (default: every complete version)");
  verify->add_flag("--json", json_out, "JSON output");
  auto* redist = cli.add_subcommand("redistribute", "rewrite a version for M ranks as a new version");
  redist->add_option("app", app, "application")->required();
  redist->add_option("-v,--version", version, "source version (default: newest complete)");
  redist->add_option("--to", to, "new number of ranks M (>= 1)")->required();
  redist->add_option("--layout", layouts, "PREDEFINED object's parts on M ranks: LABEL=OFFSET:COUNT,... (one per new rank)");
  redist->add_option("--grid", grids, "PREDEFINED process-grid object's grid on M ranks: LABEL=D0xD1...");
  auto* exp = cli.add_subcommand("export", "write one object (label) as a raw file or a NumPy .npy file");
  exp->add_option("app", app, "application")->required();
  exp->add_option("label", label, "object label")->required();
  exp->add_option("-o,--output", out, "output file (must not exist)")->required();
  exp->add_option("-v,--version", version, "version (default: newest complete)");
  exp->add_option("--format", format, "raw or npy (default: npy when the output ends in .npy)")
      ->check(CLI::IsMember({"raw", "npy"}));
  exp->add_option("--rank", rank, "rank of a rank-private object (default 0)");
  CLI11_PARSE(cli, argc, argv);

  try {
    if (*ls) {
      std::vector<ir::AppSummary> apps;
      if (app.empty()) apps = ir::list(root, uid);
      else apps.push_back(ir::list_app(ck::Store(root, app, uid)));
      if (json_out) {
        nlohmann::json j = nlohmann::json::array();
        for (auto& a : apps) j.push_back(ir::to_json(a));
        std::cout << j.dump(2) << "\n";
        return 0;
      }
      std::printf("%-20s %10s %6s %-19s %10s %10s %s\n", "APP", "VERSION", "RANKS", "TIME", "SIZE", "STORED", "COMPRESSION");
      for (auto& a : apps)
        for (auto& v : a.versions)
          if (v.complete)
            std::printf("%-20s %10llu %6d %-19s %10s %10s %s\n", a.app.c_str(), (unsigned long long)v.version, v.nranks,
                        when(v.created_unix).c_str(), human(v.bytes).c_str(), human(v.stored_bytes).c_str(),
                        v.compressed ? "zstd" : "none");
          else
            std::printf("%-20s %10llu incomplete: %s\n", a.app.c_str(), (unsigned long long)v.version, v.problem.c_str());
      return 0;
    }
    ck::Store st(root, app, uid);
    if (*show) {
      ir::VersionInfo vi = ir::describe(st, version ? version : ir::newest(st));
      if (json_out) {
        std::cout << ir::to_json(vi).dump(2) << "\n";
        return 0;
      }
      const auto& m = vi.manifest;
      std::printf("app %s version %llu: %d ranks, %s, %s (%s stored)%s\n", m.app.c_str(), (unsigned long long)m.version,
                  m.nranks, when(m.created_unix).c_str(), human(m.total_bytes()).c_str(),
                  human(m.total_stored_bytes()).c_str(), vi.has_meta ? "" : ", no redistribution metadata");
      std::printf("%-16s %-16s %-8s %-9s %12s %8s %s\n", "LABEL", "ROLE", "TYPE", "DIST", "GLOBAL", "WIDTH", "COUNTS PER RANK");
      for (auto& o : vi.objects) {
        std::string counts;
        for (auto c : o.counts) counts += (counts.empty() ? "" : ",") + std::to_string(c);
        std::string width = o.dist == "block" || o.dist == "cyclic" ? std::to_string(o.width) : "-";
        if (o.dist == "grid") {
          width.clear();
          for (auto d : o.dims) width += (width.empty() ? "" : "x") + std::to_string(d);
        }
        std::printf("%-16s %-16s %-8s %-9s %12s %8s %s\n", o.label.c_str(), o.role.c_str(), ck::to_string(o.type),
                    o.dist.empty() ? "-" : o.dist.c_str(), o.dist.empty() ? "-" : std::to_string(o.global).c_str(),
                    width.c_str(), counts.c_str());
      }
      return 0;
    }
    if (*verify) {
      std::vector<std::uint64_t> vs;
      if (version) {
        ir::describe(st, version);  // refuses an unknown version or a damaged manifest
        vs.push_back(version);
      } else {
        for (auto& v : ir::list_app(st).versions)
          if (v.complete) vs.push_back(v.version);
        if (vs.empty()) throw ir::Error("application '" + app + "' has no complete version");
      }
      nlohmann::json j = nlohmann::json::array();
      int rc = 0;
      for (auto v : vs) {
        ir::VerifyResult r = ir::verify(st, v);
        j.push_back(ir::to_json(r));
        if (!json_out) {
          if (r.ok) std::printf("version %llu ok: %llu chunks, %s\n", (unsigned long long)v, (unsigned long long)r.chunks, human(r.bytes).c_str());
          else std::printf("version %llu BAD: %s\n", (unsigned long long)v, r.message.c_str());
        }
        if (!r.ok) {
          if (!json_out) std::fprintf(stderr, "icredist: first bad chunk: %s\n", r.bad_file.c_str());
          rc = 1;
          break;
        }
      }
      if (json_out) std::cout << j.dump(2) << "\n";
      return rc;
    }
    if (*redist) {
      std::map<std::string, ir::Predefined> pre;
      for (auto& s : layouts) {
        auto [l, spec] = split_eq(s, "--layout");
        auto& p = pre[l];
        for (auto& part : split(spec, ',')) {
          auto c = part.find(':');
          if (c == std::string::npos) throw ir::Error("--layout " + l + ": part '" + part + "' is not OFFSET:COUNT");
          p.offsets.push_back(num(part.substr(0, c), "--layout " + l));
          p.counts.push_back(num(part.substr(c + 1), "--layout " + l));
        }
      }
      for (auto& s : grids) {
        auto [l, spec] = split_eq(s, "--grid");
        auto& p = pre[l];
        for (auto& part : split(spec, 'x')) {
          std::uint64_t d = num(part, "--grid " + l);
          if (d < 1 || d > (1u << 20)) throw ir::Error("--grid " + l + ": dimension " + part + " outside 1..2^20");
          p.dims.push_back(int(d));
        }
      }
      if (to <= 0) throw ir::Error("--to " + std::to_string(to) + ": the new number of ranks must be >= 1");
      const std::uint64_t src = version ? version : ir::newest(st);
      ck::Manifest m = ir::redistribute(st, src, to, pre);
      std::printf("version %llu (%s) redistributed to %d ranks: version %llu, %s\n", (unsigned long long)src,
                  m.attrs.at("icredist.source").c_str(), m.nranks, (unsigned long long)m.version,
                  human(m.total_bytes()).c_str());
      return 0;
    }
    if (*exp) {
      ir::VersionInfo vi = ir::describe(st, version ? version : ir::newest(st));
      const bool npy = format.empty() ? out.size() > 4 && out.substr(out.size() - 4) == ".npy" : format == "npy";
      std::uint64_t n = ir::export_label(st, vi, label, out, npy, rank);
      std::printf("%s: %s of '%s' (version %llu) as %s\n", out.c_str(), human(n).c_str(), label.c_str(),
                  (unsigned long long)vi.manifest.version, npy ? "npy" : "raw");
      return 0;
    }
  } catch (const ir::Error& e) {
    std::fprintf(stderr, "icredist: %s\n", e.what());
    return 2;
  } catch (const ck::Error& e) {
    std::fprintf(stderr, "icredist: %s\n", e.what());
    return e.code() == ck::Errc::invalid || e.code() == ck::Errc::perm ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "icredist: %s\n", e.what());
    return 1;
  }
  return 0;
}
