// Helpers of the entry functions (not installed).
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace dynres::fuzz::detail {

/// A private directory for this process's input files (removed at exit).
const std::string& work_dir();
/// Write the input to work_dir()/name; returns the path.
std::string write_input(const std::string& name, const uint8_t* data, size_t size);
/// Throw Violation(what) unless ok.
void require(bool ok, const std::string& what);
/// Throw Violation unless e's message contains `name` and is more than a
/// bare standard-library conversion name (where: the function that threw).
void require_named(const std::exception& e, const std::string& name, const std::string& where);

}  // namespace dynres::fuzz::detail
