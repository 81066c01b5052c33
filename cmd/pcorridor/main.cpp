// pcorridor — set and show the power corridor, sample and plot power
// (pcorridor(1); [John24 §5.2.1], Eq. 5.4/5.5). Logic in lib/power.
// Exit codes: 0 success (also when nothing changed), 1 runtime error
// (no cluster, state file, gnuplot), 2 bad input (nothing changed).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iomanip>
#include <set>
#include <iostream>

#include "dynres/corridor.hpp"
#include "dynres/paths.hpp"
#include "dynres/requests.hpp"

namespace pw = dynres::power;

int main(int argc, char** argv) {
  CLI::App app{"Set and show the power corridor of a dynres cluster, sample and plot its power draw "
               "(modelled for virtual nodes, RAPL where readable).",
               "pcorridor"};
  app.require_subcommand(1);
  app.fallthrough();  // --home and -v also after the subcommand
  std::string home;
  bool verbose = false;
  app.add_option("--home", home, "cluster directory (default: $DYNRES_HOME)");
  app.add_flag("-v,--verbose", verbose, "say what happened even when nothing changed");

  auto* set = app.add_subcommand("set", "record a new corridor LOWER..UPPER watts and wake the scheduler");
  std::vector<std::string> pos;
  std::string lower_s, upper_s, at_s, reason;
  bool force = false;
  set->add_option("bounds", pos, "LOWER UPPER in watts")->expected(0, 2);
  set->add_option("--lower", lower_s, "lower bound, watts");
  set->add_option("--upper", upper_s, "upper bound, watts");
  set->add_option("--at", at_s, "when it takes effect: now, epoch seconds, +N[s|m|h|d], YYYY-MM-DD HH:MM[:SS]");
  set->add_option("--reason", reason, "why (kept in the history)");
  set->add_flag("--force", force, "accept a lower bound below the idle floor");

  auto* show = app.add_subcommand("show", "current corridor, modelled draw, headroom and guarantees (Eq. 5.4/5.5)");
  bool json_out = false;
  show->add_flag("--json", json_out, "print JSON");
  std::string vsince_s, vuntil_s;
  double grace = 0;
  show->add_option("--since", vsince_s, "count violations from this time on (same forms as --at; default: all samples)");
  show->add_option("--until", vuntil_s, "count violations up to this time (default: the last sample)");
  show->add_option("--grace", grace, "seconds an episode outside the corridor may last without counting as a "
                                     "violation (default 0, as mjsim --grace)")
      ->check(CLI::Validator(
          [](std::string& v) {  // CLI::Range lets nan through
            char* e = nullptr;
            double x = std::strtod(v.c_str(), &e);
            return e && *e == '\0' && std::isfinite(x) && x >= 0 && x <= 1e9 ? std::string()
                                                                               : "'" + v + "' is not a number of seconds in [0, 1e9]";
          },
          "SECONDS in [0, 1e9]"));

  auto* hist = app.add_subcommand("history", "corridors recorded");
  std::string since_s = "0";
  hist->add_option("--since", since_s, "only corridors effective from this time on (same forms as --at, e.g. -1d)");
  hist->add_flag("--json", json_out, "print JSON");

  auto* sample = app.add_subcommand("sample", "record and print one reading per node (modelled or rapl)");
  std::string rapl_root;
  double interval = 1.0;
  sample->add_option("--rapl", rapl_root, "also measure this machine through powercap RAPL under this root "
                                          "(e.g. /sys/class/powercap)");
  sample->add_option("--interval", interval, "RAPL measuring interval, seconds")->check(CLI::Range(0.01, 60.0));
  sample->add_flag("--json", json_out, "print JSON");

  auto* plot = app.add_subcommand("plot", "PNG of the sampled total draw and the corridor (gnuplot)");
  std::string output;
  plot->add_option("-o,--output", output, "PNG file to write")->required();
  plot->add_option("--since", since_s, "only samples from this time on");

  // "set -5 1000": CLI11 would take -5 for an option and say "arguments
  // were not expected"; a negative bound is a bad value, named as such
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "set")
      for (int k = i + 1; k < argc; ++k)
        if (argv[k][0] == '-' && (std::isdigit(static_cast<unsigned char>(argv[k][1])) || argv[k][1] == '.') &&
            !std::set<std::string>{"--at", "--reason", "--lower", "--upper", "--home"}.count(argv[k - 1])) {
          std::cerr << "pcorridor: error: bound '" << argv[k]
                    << "' is negative: the corridor is LOWER UPPER in watts, both >= 0\n";
          return 2;
        }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    home = dynres::cluster_home(home);
  } catch (const std::exception& e) {
    std::cerr << "pcorridor: error: " << e.what() << "\n";
    return 1;
  }
  try {
    double now = dynres::now_seconds();
    if (*set) {
      if (pos.size() == 1) throw pw::InputError("give both LOWER and UPPER (or --lower and --upper)");
      if (pos.size() == 2 && (!lower_s.empty() || !upper_s.empty()))
        throw pw::InputError("give the bounds either as LOWER UPPER or with --lower/--upper, not both");
      if (pos.size() == 2) lower_s = pos[0], upper_s = pos[1];
      if (lower_s.empty() || upper_s.empty()) throw pw::InputError("both a lower and an upper bound are required");
      pw::SetRequest r;
      r.lower = pw::parse_watts(lower_s, "lower bound");
      r.upper = pw::parse_watts(upper_s, "upper bound");
      if (!at_s.empty()) r.at = pw::parse_time(at_s, now);
      // recorded by mjsched, which checks that we are the cluster's owner or root
      nlohmann::json q = {{"op", "corridor_set"}, {"lower", r.lower}, {"upper", r.upper},
                          {"reason", dynres::schedd::encode_bytes(reason)}, {"force", force}};
      if (r.at) q["at"] = *r.at;
      auto rep = dynres::schedd::call_scheduler(home, q);
      if (rep.contains("error") || rep.value("rc", 1) != 0) return dynres::schedd::print_reply("pcorridor", rep);
      if (rep.value("changed", false)) {
        bool woke = !rep.value("local", false);  // mjsched recorded it and runs a pass
        std::cout << "corridor " << r.lower << " - " << r.upper << " W recorded"
                  << (r.at ? " (effective at " + at_s + ")" : "") << "; scheduler "
                  << (woke ? "woken" : "not running") << "\n";
      } else if (verbose) {
        std::cout << "corridor " << r.lower << " - " << r.upper << " W already in force; nothing changed\n";
      }
      return 0;
    }
    dynres::State st(dynres::state_path(home));
    auto model = pw::load_power_model(dynres::config_path(home));
    if (*show) {
      pw::ViolationWindow vw;
      if (!vsince_s.empty()) vw.since = pw::parse_time(vsince_s, now);
      if (!vuntil_s.empty()) vw.until = pw::parse_time(vuntil_s, now);
      if (vw.until < vw.since) throw pw::InputError("--until is before --since");
      vw.grace = grace;
      auto j = pw::show(st, model, now, vw);
      if (json_out) std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      else std::cout << pw::show_text(j);
      return 0;
    }
    if (*hist) {
      double since = pw::parse_time(since_s, now);
      auto rows = pw::corridor_history(st.db(), since);
      if (json_out) {
        auto a = nlohmann::json::array();
        for (auto& r : rows)
          a.push_back({{"id", r.id}, {"set_time", r.set_time}, {"effective_time", r.effective_time}, {"lower", r.lower},
                       {"upper", r.upper}, {"reason", r.reason}, {"forced", r.forced}});
        std::cout << a.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        for (auto& r : rows) {
          std::time_t t = static_cast<std::time_t>(r.effective_time);
          std::tm tm{};
          localtime_r(&t, &tm);
          std::cout << std::put_time(&tm, "%Y-%m-%d %H:%M:%S") << "  " << r.lower << " - " << r.upper << " W"
                    << (r.forced ? "  (forced)" : "") << (r.reason.empty() ? "" : "  " + r.reason) << "\n";
        }
      }
      return 0;
    }
    if (*sample) {
      auto rs = pw::modelled_readings(st, model);
      if (!rapl_root.empty()) {
        auto a = pw::rapl_read(rapl_root, dynres::now_seconds());
        ::usleep(static_cast<useconds_t>(interval * 1e6));
        auto b = pw::rapl_read(rapl_root, dynres::now_seconds());
        auto p = pw::rapl_power(a, b);
        for (auto& s : p.skipped) std::cerr << "pcorridor: note: RAPL zone skipped: " << s << "\n";
        char host[256] = "localhost";
        ::gethostname(host, sizeof host - 1);
        rs.push_back({host, 0, p.watts, "rapl"});
      }
      pw::record_samples(st, now, rs);
      if (json_out) {
        auto a = nlohmann::json::array();
        for (auto& r : rs) a.push_back({{"node", r.node}, {"job_id", r.job_id}, {"watts", r.watts}, {"source", r.source}});
        std::cout << nlohmann::json{{"time", now}, {"readings", a}}.dump(2) << "\n";
      } else {
        for (auto& r : rs)
          std::cout << std::left << std::setw(12) << r.node << std::right << std::fixed << std::setprecision(1)
                    << std::setw(9) << r.watts << " W  " << r.source
                    << (r.job_id ? "  job " + std::to_string(r.job_id) : std::string("  idle")) << "\n";
      }
      return 0;
    }
    if (*plot) {
      double since = pw::parse_time(since_s, now);
      pw::plot(st, output, since, now);
      if (verbose) std::cout << "wrote " << output << "\n";
      return 0;
    }
  } catch (const pw::InputError& e) {
    std::cerr << "pcorridor: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "pcorridor: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
