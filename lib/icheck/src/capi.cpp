// C API of iCheck (include/icheck.h) over dynres::icheck::Client.
#include "icheck.h"

#include <cstdarg>
#include <cstdlib>
#include <new>
#include <string>

#include "adapt.hpp"
#include "dynres/icheck/client.hpp"
#include "dynres/icheck/fabric.hpp"

using dynres::icheck::Adapt;
using dynres::icheck::Client;

namespace {
/// Warm libfabric up as soon as the library is loaded (see
/// dynres::icheck::prepare_fabric); ICHECK_NO_PREINIT=1 turns it off.
__attribute__((constructor)) void icheck_preinit() {
  const char* e = std::getenv("ICHECK_NO_PREINIT");
  if (!e || std::string(e) != "1") dynres::icheck::prepare_fabric();
}

Client& client() {
  static Client* c = new Client();  // never destroyed: safe at exit
  return *c;
}
/// Roles and distributions of the added objects [John24 §7.4.1].
Adapt& adapt() {
  static Adapt* a = new Adapt(client());
  return *a;
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
  return guard([&] {
    int rc = client().init(config, app_name, comm, status);
    if (rc == ICHECK_OK) adapt().clear();
    return rc;
  });
}
int icheck_add(const char* label, void* ptr, size_t count, icheck_type type) {
  return guard([&] { return adapt().add_plain(label, ptr, count, int(type)); });
}
int icheck_add_adapt(const char* label, void* ptr, size_t count, icheck_type type, int attribute, ...) {
  va_list ap;
  va_start(ap, attribute);
  int rc = guard([&] { return adapt().add_adapt(label, ptr, count, int(type), attribute, ap); });
  va_end(ap);
  return rc;
}
int icheck_add_adapt_global(const char* label, void* ptr, icheck_type type, size_t global_count, int dist, ...) {
  va_list ap;
  va_start(ap, dist);
  int rc = guard([&] { return adapt().add_global(label, ptr, int(type), global_count, dist, ap); });
  va_end(ap);
  return rc;
}
int icheck_adapt_local_count(const char* label, size_t* count) {
  return guard([&] { return adapt().local_count(label, count); });
}
int icheck_restart_size(void) { return adapt().restart_size(); }
int icheck_pmap_create(icheck_pmap** pmap) {
  if (!pmap) return ICHECK_EINVAL;
  return guard([&] {
    *pmap = new icheck_pmap();
    return ICHECK_OK;
  });
}
void icheck_pmap_free(icheck_pmap* pmap) { delete pmap; }
static int pmap_add(icheck_pmap* pmap, dynres::icheck::dist::Layout l) {
  namespace dist = dynres::icheck::dist;
  for (auto& x : pmap->layouts)
    if (x.nprocs == l.nprocs) return ICHECK_EEXIST;
  std::string why = dist::validate(l);
  if (!why.empty()) {
    client().set_error("processor mapping for " + std::to_string(l.nprocs) + " processes: " + why);
    return ICHECK_ELAYOUT;
  }
  pmap->layouts.push_back(std::move(l));
  return ICHECK_OK;
}
int icheck_add_processor_mapping(icheck_pmap* pmap, int num_procs, int ndims, const int* dims, const size_t* shape) {
  namespace dist = dynres::icheck::dist;
  if (!pmap || !dims || !shape || ndims < 1 || ndims > dist::kMaxDims || num_procs < 1) return ICHECK_EINVAL;
  return guard([&] {
    dist::Layout l;
    l.kind = dist::Kind::Grid, l.nprocs = num_procs;
    l.dims.assign(dims, dims + ndims);
    l.shape.assign(shape, shape + ndims);
    uint64_t g = 1;
    for (int d = 0; d < ndims; ++d) {
      if (shape[d] && g > UINT64_MAX / shape[d]) return int(ICHECK_ELAYOUT);
      g *= shape[d];
    }
    l.global = g;
    return pmap_add(pmap, std::move(l));
  });
}
int icheck_add_processor_layout(icheck_pmap* pmap, int num_procs, const size_t* counts, const size_t* offsets) {
  namespace dist = dynres::icheck::dist;
  if (!pmap || !counts || !offsets || num_procs < 1 || num_procs > dist::kMaxProcs) return ICHECK_EINVAL;
  return guard([&] {
    dist::Layout l;
    l.kind = dist::Kind::Explicit, l.nprocs = num_procs;
    uint64_t g = 0;
    for (int i = 0; i < num_procs; ++i) {
      if (counts[i] > UINT64_MAX - g) return int(ICHECK_ELAYOUT);
      g += counts[i];
      l.counts.push_back(counts[i]), l.offsets.push_back(offsets[i]);
    }
    l.global = g;
    return pmap_add(pmap, std::move(l));
  });
}
int icheck_commit(void) {
  return guard([] {
    int rc = adapt().before_commit();
    return rc != ICHECK_OK ? rc : client().commit();
  });
}
int icheck_restart(void) { return guard([] { return adapt().restart(); }); }
int icheck_restore(const char* label, void* ptr, size_t count) {
  return guard([&] { return adapt().restore(label, ptr, count); });
}
int icheck_restart_all(void) { return guard([] { return adapt().restart_all(); }); }
int icheck_redistribute(const char* label, void* ptr, size_t count) {
  return guard([&] { return adapt().redistribute(label, ptr, count); });
}
int icheck_probe_agents(const icheck_hints* hints) { return guard([&] { return client().probe(hints); }); }
int icheck_enable_asynchronous(int flag) { return guard([&] { return client().enable_async(flag); }); }
int icheck_wait(void) { return guard([] { return client().wait(); }); }
int icheck_finalize(int flags) {
  return guard([&] {
    int rc = client().finalize(flags);
    if (rc != ICHECK_EINVAL && rc != ICHECK_ESTATE) adapt().clear();
    return rc;
  });
}
int64_t icheck_version(void) { return client().version(); }
const char* icheck_mode(void) { return client().mode(); }
const char* icheck_last_error(void) { return client().last_error(); }
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
    case ICHECK_ELAYOUT:
      return "data distribution invalid (counts do not sum to the global count, overlap, no mapping for this "
             "process count, or size overflow)";
    default: return "unknown icheck error";
  }
}
}
