#include "dynres/icheck/types.hpp"

namespace dynres::icheck {

size_t icheck_elem_size(int t) {
  switch (t) {
    case 1: return 4;
    case 2: return 8;
    case 3: return 4;
    case 4: return 1;
    case 5: return 1;
    default: return 0;
  }
}

}  // namespace dynres::icheck
