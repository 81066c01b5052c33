// bench_icheck_commit — commit / restart time and bandwidth of libicheck
// against same-run baselines (seed 000 §6.2, Eq. 6.1-6.4):
//   memcpy (single thread), POSIX write+fsync into the second-level dir.
// One application process, one agent (a thread of this process, so the
// transfer still goes through libfabric shm / tcp;ofi_rxm between endpoints).
// usage: bench_icheck_commit [--quick] [--mib N]   (--quick: 64 MiB only)
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dynres/icheck/agent.hpp"
#include "dynres/icheck/client.hpp"

namespace fs = std::filesystem;
using namespace dynres::icheck;
using clk = std::chrono::steady_clock;
static double secs(clk::time_point a) { return std::chrono::duration<double>(clk::now() - a).count(); }

int main(int argc, char** argv) {
  std::vector<size_t> sizes = {64, 512};
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) sizes = {64};
    if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) sizes = {size_t(std::atol(argv[++i]))};
  }
  char tmpl[] = "/tmp/icheck_bench.XXXXXX";
  fs::path dir = ::mkdtemp(tmpl);
  std::printf("%-8s %-12s %-5s %-6s %10s %10s %8s\n", "MiB", "provider", "mode", "kind", "seconds", "GB/s", "ratio");
  for (size_t mib : sizes) {
    size_t bytes = mib << 20, n = bytes / sizeof(double);
    std::vector<double> data(n), copy(n);
    for (size_t i = 0; i < n; ++i) data[i] = double(i);
    std::memcpy(copy.data(), data.data(), bytes);  // warm
    auto t0 = clk::now();
    std::memcpy(copy.data(), data.data(), bytes);
    double t_memcpy = secs(t0);
    t0 = clk::now();
    {
      int fd = ::open((dir / "baseline.dat").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      size_t off = 0;
      while (off < bytes) off += size_t(::write(fd, reinterpret_cast<char*>(data.data()) + off, bytes - off));
      ::fsync(fd);
      ::close(fd);
    }
    double t_fsync = secs(t0);
    fs::remove(dir / "baseline.dat");
    auto row = [&](const char* prov, const char* mode, const char* kind, double t, double base) {
      std::printf("%-8zu %-12s %-5s %-6s %10.4f %10.2f %8.2f\n", mib, prov, mode, kind, t, bytes / t / 1e9, base / t);
    };
    row("-", "-", "memcpy", t_memcpy, t_memcpy);
    row("-", "-", "fsync", t_fsync, t_memcpy);
    for (const char* prov : {"shm", "tcp;ofi_rxm"}) {
      for (const char* mode : {"pull", "push"}) {
        std::string sock = (dir / "a.sock").string();
        AgentOptions ao;
        ao.listen = "unix:" + sock;
        ao.app = "bench";
        ao.uid = uint32_t(::geteuid());
        ao.provider = prov;
        ao.fabric_node = "127.0.0.1";
        ao.multi_level = false;
        ao.print_ready = false;
        std::atomic<bool> stop{false};
        std::thread agent([&] { run_agent(ao, &stop); });
        while (!fs::exists(sock)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        std::ofstream(dir / "c.yaml") << "agents: [\"unix:" << sock << "\"]\npfs_dir: " << (dir / "pfs").string()
                                      << "\ntransport: {provider: \"" << prov << "\", node: 127.0.0.1}\n";
        ::setenv("ICHECK_TRANSFER", mode, 1);
        int st;
        double best = 1e9, async_call = 1e9, async_total = 1e9, t_restart = 0;
        {
          Client c;
          c.init((dir / "c.yaml").c_str(), "bench", nullptr, &st);
          c.add("data", data.data(), n, ICHECK_DOUBLE);
          for (int k = 0; k < 3; ++k) {
            t0 = clk::now();
            if (c.commit() != ICHECK_OK) std::fprintf(stderr, "commit failed\n");
            best = std::min(best, secs(t0));
          }
          c.enable_async(1);
          for (int k = 0; k < 2; ++k) {
            t0 = clk::now();
            c.commit();
            async_call = std::min(async_call, secs(t0));
            c.wait();
            async_total = std::min(async_total, secs(t0));
          }
          c.finalize(IC_PERSIST);
        }
        {
          Client c;
          std::vector<double> back(n);
          c.init((dir / "c.yaml").c_str(), "bench", nullptr, &st);
          c.add("data", back.data(), n, ICHECK_DOUBLE);
          t0 = clk::now();
          int rc = c.restart_all();
          t_restart = secs(t0);
          if (rc || back != data) std::fprintf(stderr, "restart mismatch (%d)\n", rc);
          c.finalize(IC_PERSIST);
        }
        stop = true;
        agent.join();
        std::string p = std::string(prov) == "shm" ? "shm" : "tcp;ofi_rxm";
        row(p.c_str(), mode, "commit", best, t_memcpy);
        row(p.c_str(), mode, "async", async_call, t_memcpy);
        row(p.c_str(), mode, "a+wait", async_total, t_memcpy);
        row(p.c_str(), mode, "restrt", t_restart, t_memcpy);
        std::printf("%-8zu %-12s %-5s commit vs write+fsync: %.2fx faster\n", mib, p.c_str(), mode, t_fsync / best);
      }
    }
  }
  std::printf("ratio = baseline memcpy time / measured time (1.0 = memcpy speed)\n");
  fs::remove_all(dir);
  return 0;
}
