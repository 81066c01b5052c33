// Slurm's time-limit formats (sbatch --time) and squeue-style printing.
#pragma once
#include <cstdint>
#include <string>

namespace dynres {

/// Seconds meaning "no limit" (sbatch accepts UNLIMITED / INFINITE / -1).
constexpr int64_t kUnlimited = -1;

/// Parse a time limit as Slurm's time_str2secs does: "MM", "MM:SS",
/// "HH:MM:SS", "D-", "D-HH", "D-HH:MM", "D-HH:MM:SS", or
/// UNLIMITED/INFINITE/-1; fields are not range-checked (00-24:00 is a day).
/// Returns seconds (or kUnlimited). Throws std::invalid_argument with a message
/// naming the value for anything else (empty, negative, non-digits, too many
/// fields), std::out_of_range for a field of more than 12 digits.
int64_t parse_time_limit(const std::string& s);

/// Print seconds like squeue: "M:SS", "H:MM:SS", "D-HH:MM:SS";
/// kUnlimited (or any negative) prints "UNLIMITED".
std::string format_duration(int64_t seconds);

}  // namespace dynres
