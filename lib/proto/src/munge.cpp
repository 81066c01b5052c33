// MUNGE credentials for TCP connections (libmunge: munge_encode/munge_decode
// talk to the local munged). Built without libmunge (DYNRES_HAVE_MUNGE unset)
// no credential can be made or verified, so TcpAuth::munge refuses every TCP
// connection with a reason saying so.
#include <cstdlib>

#include "detail.hpp"

#ifdef DYNRES_HAVE_MUNGE
#include <munge.h>

#include <memory>
#include <type_traits>
#endif

namespace dynres::proto::detail {

#ifdef DYNRES_HAVE_MUNGE
namespace {

using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, decltype(&munge_ctx_destroy)>;

Ctx make_ctx(std::string& err) {
  Ctx ctx(munge_ctx_create(), &munge_ctx_destroy);
  if (!ctx) err = "munge_ctx_create: out of memory";
  return ctx;
}

// The detailed message of a failed call (e.g. which socket could not be
// reached), falling back to the generic text of the error code.
std::string why(const Ctx& ctx, munge_err_t e) {
  const char* s = ctx ? munge_ctx_strerror(ctx.get()) : nullptr;
  return s ? s : munge_strerror(e);
}

}  // namespace

std::optional<std::string> munge_credential(std::string& err) {
  Ctx ctx = make_ctx(err);
  if (!ctx) return std::nullopt;
  char* cred = nullptr;
  munge_err_t e = munge_encode(&cred, ctx.get(), nullptr, 0);
  std::unique_ptr<char, decltype(&std::free)> owned(cred, &std::free);
  if (e != EMUNGE_SUCCESS) {
    err = "munge_encode: " + why(ctx, e);
    return std::nullopt;
  }
  return std::string(cred);
}

std::optional<long> munge_verify(const std::string& cred, std::string& err) {
  Ctx ctx = make_ctx(err);
  if (!ctx) return std::nullopt;
  void* payload = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  munge_err_t e = munge_decode(cred.c_str(), ctx.get(), &payload, &len, &uid, &gid);
  std::free(payload);
  if (e != EMUNGE_SUCCESS) {
    err = "munge_decode: " + why(ctx, e);
    return std::nullopt;
  }
  return long(uid);
}

#else

namespace {
const char* const kNotBuilt = "this program was built without MUNGE support (install libmunge-dev and rebuild)";
}

std::optional<std::string> munge_credential(std::string& err) {
  err = kNotBuilt;
  return std::nullopt;
}

std::optional<long> munge_verify(const std::string&, std::string& err) {
  err = kNotBuilt;
  return std::nullopt;
}

#endif

}  // namespace dynres::proto::detail
