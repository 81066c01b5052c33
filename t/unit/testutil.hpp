// Helpers shared by the Catch2 unit tests (t/unit/<module>/*.cpp).
#pragma once
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

namespace dynres::test {

/// A fresh directory under $TMPDIR (or /tmp), removed with everything in it
/// when the object goes out of scope.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "unit") {
    std::string tmpl = (std::filesystem::temp_directory_path() / ("dynres-" + tag + "-XXXXXX")).string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  /// Path of `name` inside the directory.
  std::string file(const std::string& name) const { return (path / name).string(); }
  /// Write `text` to `name` inside the directory; returns its path.
  std::string write(const std::string& name, const std::string& text) const {
    auto p = file(name);
    std::ofstream(p) << text;
    return p;
  }
};

}  // namespace dynres::test
