// C API of iCheck (include/icheck.h) over dynres::icheck::Client.
#include "icheck.h"

#include <new>

#include "dynres/icheck/client.hpp"

using dynres::icheck::Client;

namespace {
Client& client() {
  static Client* c = new Client();  // never destroyed: safe at exit
  return *c;
}
template <class F>
int guard(F f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return ICHECK_ENOMEM;
  } catch (...) {
    return ICHECK_EIO;
  }
}
}  // namespace

extern "C" {
int icheck_init(const char* config, const char* app_name, const void* comm, int* status) {
  return guard([&] { return client().init(config, app_name, comm, status); });
}
int icheck_add(const char* label, void* ptr, size_t count, icheck_type type) {
  return guard([&] { return client().add(label, ptr, count, int(type)); });
}
int icheck_commit(void) { return guard([] { return client().commit(); }); }
int icheck_restart(void) { return guard([] { return client().restart(); }); }
int icheck_restore(const char* label, void* ptr, size_t count) {
  return guard([&] { return client().restore(label, ptr, count); });
}
int icheck_restart_all(void) { return guard([] { return client().restart_all(); }); }
int icheck_probe_agents(const icheck_hints* hints) { return guard([&] { return client().probe(hints); }); }
int icheck_enable_asynchronous(int flag) { return guard([&] { return client().enable_async(flag); }); }
int icheck_wait(void) { return guard([] { return client().wait(); }); }
int icheck_finalize(int flags) { return guard([&] { return client().finalize(flags); }); }
int64_t icheck_version(void) { return client().version(); }
const char* icheck_mode(void) { return client().mode(); }
const char* icheck_strerror(int err) {
  switch (err) {
    case ICHECK_OK: return "success";
    case ICHECK_EINVAL: return "invalid argument (NULL pointer, zero count, bad type or flag)";
    case ICHECK_ELABEL: return "label empty, too long, or not a safe file-name component";
    case ICHECK_EEXIST: return "label already added";
    case ICHECK_ENOENT: return "unknown label or no checkpoint to restart";
    case ICHECK_EMISMATCH: return "restore with a different count or type";
    case ICHECK_ESTATE: return "call out of order";
    case ICHECK_ECONTROLLER: return "controller unreachable";
    case ICHECK_EAGENT: return "agent failure during a transfer";
    case ICHECK_EIO: return "second-level file I/O failed";
    case ICHECK_ECORRUPT: return "checksum mismatch: data refused";
    case ICHECK_ENOMEM: return "out of memory";
    case ICHECK_EPERM: return "checkpoint belongs to another user or application";
    case ICHECK_EFABRIC: return "libfabric error";
    default: return "unknown icheck error";
  }
}
}
