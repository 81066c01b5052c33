// Element types of checkpoint regions as they travel between the library
// and the agents (the `type` field of a region; icheck_type in icheck.h,
// [John24 §6.1.2]). Shared by the application library and the agent.
#pragma once
#include <cstddef>

namespace dynres::icheck {

/// Element size in bytes of an icheck_type value (1..5), 0 for anything else.
size_t icheck_elem_size(int type);

}  // namespace dynres::icheck
