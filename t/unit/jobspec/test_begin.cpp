// --begin HH:MM[:SS] means today when that time is still ahead and tomorrow
// when it has passed, as sbatch's --begin does; absolute dates and now+N.
#include <catch2/catch.hpp>
#include <ctime>

#include "dynres/jobspec.hpp"

using namespace dynres;

namespace {
/// Local time today at h:m:s (mktime, so daylight saving is the library's).
double today_at(int h, int m, int s) {
  time_t t = ::time(nullptr);
  struct tm tmv;
  ::localtime_r(&t, &tmv);
  tmv.tm_hour = h, tmv.tm_min = m, tmv.tm_sec = s, tmv.tm_isdst = -1;
  return static_cast<double>(::mktime(&tmv));
}
double tomorrow_at(int h, int m, int s) {
  time_t t = ::time(nullptr);
  struct tm tmv;
  ::localtime_r(&t, &tmv);
  tmv.tm_mday += 1;
  tmv.tm_hour = h, tmv.tm_min = m, tmv.tm_sec = s, tmv.tm_isdst = -1;
  return static_cast<double>(::mktime(&tmv));
}
}  // namespace

TEST_CASE("--begin HH:MM: today while ahead, tomorrow once passed", "[jobspec][begin]") {
  const double noon = today_at(12, 0, 0);
  CHECK(parse_begin_time("13:30", noon) == today_at(13, 30, 0));
  CHECK(parse_begin_time("13:30:15", noon) == today_at(13, 30, 15));
  CHECK(parse_begin_time("11:00", noon) == tomorrow_at(11, 0, 0));
  CHECK(parse_begin_time("00:00:01", noon) == tomorrow_at(0, 0, 1));
  CHECK(parse_begin_time("12:00", noon) == noon);  // the very moment: now, not tomorrow
  CHECK(parse_begin_time("12:00", noon + 1) == tomorrow_at(12, 0, 0));
}

TEST_CASE("--begin: relative, absolute and bad forms", "[jobspec][begin]") {
  const double noon = today_at(12, 0, 0);
  CHECK(parse_begin_time("now+90", noon) == noon + 90);
  CHECK(parse_begin_time("now+2hours", noon) == noon + 7200);
  CHECK(parse_begin_time("now+1d", noon) == noon + 86400);
  struct tm at {};
  at.tm_year = 2031 - 1900, at.tm_mon = 1, at.tm_mday = 3, at.tm_hour = 4, at.tm_min = 5, at.tm_isdst = -1;
  CHECK(parse_begin_time("2031-02-03T04:05", noon) == static_cast<double>(::mktime(&at)));
  for (const char* bad : {"25:00", "12:60", "tomorrowish", "2031-13-01", "now+"}) {
    INFO(bad);
    CHECK_THROWS(parse_begin_time(bad, noon));
  }
}
