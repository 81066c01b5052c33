#include <catch2/catch.hpp>

#include "dynres/hostlist.hpp"
#include "dynres/slurmtime.hpp"

using namespace dynres;

TEST_CASE("hostlist expands ranges, lists and padding") {
  using V = std::vector<std::string>;
  CHECK(expand_hostlist("n[1-3,7]") == V{"n1", "n2", "n3", "n7"});
  CHECK(expand_hostlist("n[01-03]") == V{"n01", "n02", "n03"});
  CHECK(expand_hostlist("a1,b[2-3],c") == V{"a1", "b2", "b3", "c"});
  CHECK(expand_hostlist("rack[1-2]-n[1-2]") == V{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"});
  CHECK(expand_hostlist("").empty());
  CHECK_THROWS_WITH(expand_hostlist("n[1-3"), Catch::Contains("unbalanced"));
  CHECK_THROWS_WITH(expand_hostlist("n[3-1]"), Catch::Contains("backwards"));
  CHECK_THROWS_WITH(expand_hostlist("n[a-b]"), Catch::Contains("bad range"));
  CHECK_THROWS(expand_hostlist("n1,,n2"));
  // bounded before expanding: a range of two million names is refused
  CHECK_THROWS_WITH(expand_hostlist("n[1-2000000]"), Catch::Contains("too large"));
}

TEST_CASE("hostlist compresses like Slurm") {
  CHECK(compress_hostlist({"n1", "n2", "n3", "n4", "n7"}) == "n[1-4,7]");
  CHECK(compress_hostlist({"n7", "n1", "n2"}) == "n[1-2,7]");
  CHECK(compress_hostlist({"n5"}) == "n5");
  CHECK(compress_hostlist({"n01", "n02", "n03"}) == "n[01-03]");
  CHECK(compress_hostlist({"login", "n1", "n2"}) == "login,n[1-2]");
  CHECK(compress_hostlist({}) == "");
  CHECK(compress_hostlist({"n2", "n1", "n2", "n1"}) == "n[1-2]");  // duplicates once
  // a numeric suffix too long for a number stays a plain name
  CHECK(compress_hostlist({"x12345678901234567890"}) == "x12345678901234567890");
  // round trip on a larger list
  std::vector<std::string> v;
  for (int i = 1; i <= 34; ++i)
    if (i % 5 != 0) v.push_back("n" + std::to_string(i));
  CHECK(expand_hostlist(compress_hostlist(v)) == v);
}

TEST_CASE("time limits in every sbatch format") {
  CHECK(parse_time_limit("30") == 30 * 60);
  CHECK(parse_time_limit("30:15") == 30 * 60 + 15);
  CHECK(parse_time_limit("1:02:03") == 3723);
  CHECK(parse_time_limit("2-3") == 2 * 86400 + 3 * 3600);
  CHECK(parse_time_limit("2-3:04") == 2 * 86400 + 3 * 3600 + 4 * 60);
  CHECK(parse_time_limit("2-03:04:05") == 2 * 86400 + 3 * 3600 + 4 * 60 + 5);
  CHECK(parse_time_limit("UNLIMITED") == kUnlimited);
  CHECK(parse_time_limit("infinite") == kUnlimited);
  // as Slurm's time_str2secs: "D-" is D days, fields are not range-checked
  CHECK(parse_time_limit("1-") == 86400);
  CHECK(parse_time_limit("00-24:00") == 86400);
  CHECK(parse_time_limit("10:61") == 10 * 60 + 61);
  CHECK(parse_time_limit("1:60:00") == 2 * 3600);
  for (const char* bad : {"", "abc", "1:2:3:4", "-5", "1-2-5", "1:", ":5", "1-2:", "5m", "1.5", "1:2-3"})
    CHECK_THROWS_AS(parse_time_limit(bad), std::invalid_argument);
  CHECK_THROWS_WITH(parse_time_limit("10:6x"), Catch::Contains("10:6x"));
  CHECK_THROWS_AS(parse_time_limit("9999999999999"), std::out_of_range);  // no overflow
}

TEST_CASE("durations print like squeue") {
  CHECK(format_duration(0) == "0:00");
  CHECK(format_duration(65) == "1:05");
  CHECK(format_duration(3723) == "1:02:03");
  CHECK(format_duration(2 * 86400 + 5) == "2-00:00:05");
  CHECK(format_duration(-1) == "UNLIMITED");
}
