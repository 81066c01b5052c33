// One libFuzzer target: FUZZ_ENTRY (a function of dynres/fuzz.hpp) per input.
// A broken contract (dynres::fuzz::Violation) is reported and aborts, as
// does any exception the entry does not expect; libFuzzer saves the input.
#include <cstdio>
#include <cstdlib>

#include "dynres/fuzz.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    dynres::fuzz::FUZZ_ENTRY(data, size);
  } catch (const dynres::fuzz::Violation& e) {
    std::fprintf(stderr, "contract violation: %s\n", e.what());
    std::abort();
  }
  return 0;
}
