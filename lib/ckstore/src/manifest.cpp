// MANIFEST.json of a ckstore version: schema, canonical text and checksum.
//
// The manifest's own checksum ("manifest_xxh3") is XXH3_64bits of the compact
// nlohmann dump (sorted keys, integers and strings only) of the manifest
// without that field; a reader re-dumps the parsed object, so whitespace
// changes are tolerated but any changed value is detected.
#include <ctime>
#include <map>
#include <tuple>

#include "detail.hpp"

namespace dynres::ckstore {

using nlohmann::json;
using namespace detail;

namespace {

[[noreturn]] void bad(const std::string& path, const std::string& why) {
  throw Error(Errc::corrupt, path, "bad manifest: " + why);
}

const json& need(const json& j, const char* key, const std::string& path) {
  auto it = j.find(key);
  if (it == j.end()) bad(path, std::string("missing field '") + key + "'");
  return *it;
}

std::uint64_t need_u64(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0))
    bad(path, std::string("field '") + key + "' is not a non-negative integer");
  return v.get<std::uint64_t>();
}

std::int64_t need_i64(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_number_integer()) bad(path, std::string("field '") + key + "' is not an integer");
  return v.get<std::int64_t>();
}

std::string need_str(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_string()) bad(path, std::string("field '") + key + "' is not a string");
  return v.get<std::string>();
}

bool need_bool(const json& j, const char* key, const std::string& path) {
  const json& v = need(j, key, path);
  if (!v.is_boolean()) bad(path, std::string("field '") + key + "' is not a boolean");
  return v.get<bool>();
}

std::uint64_t need_hex(const json& j, const char* key, const std::string& path) {
  std::uint64_t v = 0;
  if (!parse_hex64(need_str(j, key, path), v))
    bad(path, std::string("field '") + key + "' is not 16 lowercase hex digits");
  return v;
}

std::string iso_utc(std::int64_t t) {
  std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

/// Canonical text the manifest checksum is computed over: compact dump,
/// sorted keys, invalid UTF-8 replaced (so writer and reader agree).
std::string canonical(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json manifest_body(const Manifest& m) {
  json regions = json::array();
  for (auto& r : m.regions) regions.push_back(region_to_json(r));
  json attrs = json::object();
  for (auto& [k, v] : m.attrs) attrs[k] = v;
  return json{{"format", "dynres-ckstore"},
              {"format_version", m.format_version},
              {"app", m.app},
              {"uid", m.uid},
              {"version", m.version},
              {"created_unix", m.created_unix},
              {"created", iso_utc(m.created_unix)},
              {"nranks", m.nranks},
              {"checksum_algo", "xxh3_64"},
              {"attrs", attrs},
              {"regions", regions}};
}

}  // namespace

namespace detail {

json region_to_json(const Region& r) {
  const RegionInfo& i = r.info;
  json chunks = json::array();
  for (auto& c : r.chunks)
    chunks.push_back(json{{"file", c.file},
                          {"file_offset", c.file_offset},
                          {"raw_offset", c.raw_offset},
                          {"raw_length", c.raw_length},
                          {"stored_length", c.stored_length},
                          {"compressed", c.compressed},
                          {"raw_xxh3", hex64(c.raw_xxh3)},
                          {"stored_xxh3", hex64(c.stored_xxh3)}});
  bool any = false;
  for (auto& c : r.chunks) any = any || c.compressed;
  return json{{"label", i.label},
              {"type", to_string(i.type)},
              {"elem_size", i.elem_size ? i.elem_size : elem_size(i.type)},
              {"count", i.count},
              {"rank", i.rank},
              {"bytes", i.bytes()},
              {"stored_bytes", r.stored_bytes()},
              {"compressed", any},
              {"layout", json{{"distribution", to_string(i.layout.dist)},
                              {"block_size", i.layout.block_size},
                              {"global_count", i.layout.global_count},
                              {"global_shape", i.layout.global_shape},
                              {"global_offset", i.layout.global_offset}}},
              {"chunks", chunks}};
}

Region region_from_json(const json& j, const std::string& path, int nranks) {
  if (!j.is_object()) bad(path, "region is not an object");
  Region r;
  RegionInfo& i = r.info;
  i.label = need_str(j, "label", path);
  if (!safe_component(i.label)) bad(path, "unsafe label '" + i.label + "'");
  try {
    i.type = parse_elem_type(need_str(j, "type", path));
  } catch (const Error& e) {
    bad(path, e.what());
  }
  i.elem_size = need_u64(j, "elem_size", path);
  if (i.elem_size == 0 || (i.type != ElemType::Binary && i.elem_size != elem_size(i.type)))
    bad(path, "label '" + i.label + "': elem_size does not fit type");
  i.count = need_u64(j, "count", path);
  if (i.count == 0) bad(path, "label '" + i.label + "': count is 0");
  std::int64_t rank = need_i64(j, "rank", path);
  if (rank < 0 || (nranks > 0 && rank >= nranks))
    bad(path, "label '" + i.label + "': rank " + std::to_string(rank) + " out of range");
  i.rank = static_cast<int>(rank);
  if (need_u64(j, "bytes", path) != i.bytes())
    bad(path, "label '" + i.label + "': bytes != count * elem_size");
  const json& lay = need(j, "layout", path);
  if (!lay.is_object()) bad(path, "layout is not an object");
  try {
    i.layout.dist = parse_dist(need_str(lay, "distribution", path));
  } catch (const Error& e) {
    bad(path, e.what());
  }
  i.layout.block_size = need_u64(lay, "block_size", path);
  i.layout.global_count = need_u64(lay, "global_count", path);
  i.layout.global_offset = need_u64(lay, "global_offset", path);
  const json& shape = need(lay, "global_shape", path);
  if (!shape.is_array()) bad(path, "global_shape is not an array");
  for (auto& d : shape) {
    if (!d.is_number_unsigned()) bad(path, "global_shape holds a non-integer");
    i.layout.global_shape.push_back(d.get<std::uint64_t>());
  }
  const json& chunks = need(j, "chunks", path);
  if (!chunks.is_array() || chunks.empty()) bad(path, "label '" + i.label + "': no chunks");
  std::uint64_t next = 0;
  for (auto& cj : chunks) {
    if (!cj.is_object()) bad(path, "chunk is not an object");
    ChunkInfo c;
    c.file = need_str(cj, "file", path);
    if (!safe_component(c.file) || c.file == kManifestName)
      bad(path, "unsafe chunk file name '" + c.file + "'");
    c.file_offset = need_u64(cj, "file_offset", path);
    c.raw_offset = need_u64(cj, "raw_offset", path);
    c.raw_length = need_u64(cj, "raw_length", path);
    c.stored_length = need_u64(cj, "stored_length", path);
    c.compressed = need_bool(cj, "compressed", path);
    c.raw_xxh3 = need_hex(cj, "raw_xxh3", path);
    c.stored_xxh3 = need_hex(cj, "stored_xxh3", path);
    if (c.raw_offset != next) bad(path, "label '" + i.label + "': chunks not contiguous");
    if (c.raw_length == 0 || c.stored_length == 0)
      bad(path, "label '" + i.label + "': empty chunk");
    if (!c.compressed && (c.stored_length != c.raw_length || c.stored_xxh3 != c.raw_xxh3))
      bad(path, "label '" + i.label + "': uncompressed chunk with differing stored data");
    next += c.raw_length;
    r.chunks.push_back(std::move(c));
  }
  if (next != i.bytes()) bad(path, "label '" + i.label + "': chunks do not cover the region");
  // Within a file the stored chunks follow each other from offset 0, so the
  // file's exact size is known (verify() detects truncation and garbage).
  std::map<std::string, std::uint64_t> end;
  for (auto& c : r.chunks) {
    auto& e = end[c.file];
    if (c.file_offset != e) bad(path, "label '" + i.label + "': chunk file offsets not contiguous");
    e += c.stored_length;
  }
  return r;
}

}  // namespace detail

const Region* Manifest::find(int rank, std::string_view label) const noexcept {
  for (auto& r : regions)
    if (r.info.rank == rank && r.info.label == label) return &r;
  return nullptr;
}

std::uint64_t Manifest::total_bytes() const noexcept {
  std::uint64_t s = 0;
  for (auto& r : regions) s += r.bytes();
  return s;
}

std::uint64_t Manifest::total_stored_bytes() const noexcept {
  std::uint64_t s = 0;
  for (auto& r : regions) s += r.stored_bytes();
  return s;
}

std::string Manifest::to_json() const {
  json j = manifest_body(*this);
  const std::string canon = canonical(j);
  std::uint64_t h = xxh3(canon.data(), canon.size());
  j["manifest_xxh3"] = hex64(h);
  return j.dump(1, ' ', false, json::error_handler_t::replace) + "\n";
}

Manifest Manifest::from_json(std::string_view text, const std::string& path) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) bad(path, "not a JSON object (truncated or garbled)");
  std::uint64_t want = need_hex(j, "manifest_xxh3", path);
  j.erase("manifest_xxh3");
  const std::string canon = canonical(j);
  if (xxh3(canon.data(), canon.size()) != want) bad(path, "manifest checksum mismatch");
  try {
    return manifest_from_checked_json(j, path);
  } catch (const json::exception& e) {
    bad(path, e.what());
  }
}

Manifest detail::manifest_from_checked_json(const nlohmann::json& j, const std::string& path) {
  if (need_str(j, "format", path) != "dynres-ckstore") bad(path, "not a dynres-ckstore manifest");
  Manifest m;
  std::int64_t fv = need_i64(j, "format_version", path);
  if (fv < 1 || fv > kFormatVersion)
    bad(path, "unsupported format_version " + std::to_string(fv));
  m.format_version = static_cast<int>(fv);
  m.app = need_str(j, "app", path);
  if (!safe_component(m.app)) bad(path, "unsafe app name");
  std::uint64_t uid = need_u64(j, "uid", path);
  if (uid > 0xffffffffULL) bad(path, "uid out of range");
  m.uid = static_cast<std::uint32_t>(uid);
  m.version = need_u64(j, "version", path);
  if (m.version < 1 || m.version > kMaxVersion) bad(path, "version out of range");
  m.created_unix = need_i64(j, "created_unix", path);
  std::int64_t nr = need_i64(j, "nranks", path);
  if (nr < 1 || nr > (1 << 30)) bad(path, "nranks out of range");
  m.nranks = static_cast<int>(nr);
  if (need_str(j, "checksum_algo", path) != "xxh3_64") bad(path, "unknown checksum_algo");
  const json& attrs = need(j, "attrs", path);
  if (!attrs.is_object()) bad(path, "attrs is not an object");
  for (auto& [k, v] : attrs.items()) {
    if (!v.is_string()) bad(path, "attr '" + k + "' is not a string");
    m.attrs[k] = v.get<std::string>();
  }
  const json& regions = need(j, "regions", path);
  if (!regions.is_array()) bad(path, "regions is not an array");
  for (auto& rj : regions) m.regions.push_back(region_from_json(rj, path, m.nranks));
  std::map<std::string, std::size_t> owner;
  for (std::size_t a = 0; a < m.regions.size(); ++a)
    for (auto& c : m.regions[a].chunks) {
      auto [it, fresh] = owner.emplace(c.file, a);
      if (!fresh && it->second != a) bad(path, "file '" + c.file + "' shared by two regions");
    }
  for (std::size_t a = 1; a < m.regions.size(); ++a) {
    auto& p = m.regions[a - 1].info;
    auto& q = m.regions[a].info;
    if (std::tie(p.rank, p.label) >= std::tie(q.rank, q.label))
      bad(path, "regions not sorted by (rank, label) or duplicated");
  }
  return m;
}

}  // namespace dynres::ckstore
