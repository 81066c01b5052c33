// Replays every input kept under t/fuzz/<target>/ (the seed inputs and the
// inputs of the bugs libFuzzer found, see bench/fuzz/run.sh) through the same
// entry functions the fuzz targets run (dynres/fuzz.hpp), in the normal
// build: a fixed bug that comes back fails here.
#include <stdlib.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include "dynres/fuzz.hpp"

namespace fs = std::filesystem;
using namespace dynres::fuzz;

namespace {
fs::path inputs_dir(const std::string& target) {
  const char* src = std::getenv("DYNRES_SRC");
  REQUIRE(src);
  return fs::path(src) / "t" / "fuzz" / target;
}
std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (auto& e : fs::directory_iterator(inputs_dir(target)))
    if (e.is_regular_file()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}
void replay(const std::string& target) {
  auto t = std::find_if(targets().begin(), targets().end(), [&](auto& x) { return x.name == target; });
  REQUIRE(t != targets().end());
  auto files = inputs(target);
  REQUIRE(!files.empty());
  for (auto& f : files) {
    INFO(f.string());
    std::string bytes = read_file(f.string());
    CHECK_NOTHROW(t->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}
}  // namespace

TEST_CASE("every fuzz target has kept inputs", "[fuzz]") {
  for (auto& t : targets()) {
    INFO(t.name);
    CHECK(fs::is_directory(inputs_dir(t.name)));
  }
}

TEST_CASE("frame reader inputs replay cleanly", "[fuzz]") { replay("frame_reader"); }
TEST_CASE("resize protocol inputs replay cleanly", "[fuzz]") { replay("resize_msg"); }
TEST_CASE("iCheck wire inputs replay cleanly", "[fuzz]") { replay("icheck_wire"); }
TEST_CASE("job script inputs replay cleanly", "[fuzz]") { replay("jobspec"); }
TEST_CASE("SWF inputs replay cleanly", "[fuzz]") { replay("swf"); }
TEST_CASE("YAML configuration inputs replay cleanly", "[fuzz]") { replay("config"); }
