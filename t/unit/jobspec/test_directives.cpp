// Directive parsing: #SBATCH / #MJ lines of a job script (mjsub(1)).
#include <catch2/catch.hpp>

#include "dynres/jobspec.hpp"

using namespace dynres;
using Catch::Matchers::Contains;

namespace {
std::vector<Directive> parse(const std::string& s) { return parse_directives(s); }

JobSpec spec_of(const std::string& script) {
  JobSpec s;
  apply_directives(s, parse_directives(script));
  return s;
}
}  // namespace

TEST_CASE("directives: --opt=v, --opt v, -N4, -N 4", "[directives]") {
  auto ds = parse(
      "#!/bin/bash\n"
      "#SBATCH --job-name=alpha\n"
      "#SBATCH --time 10:00\n"
      "#SBATCH -N4\n"
      "#SBATCH -N 4\n"
      "#MJ --max-power=250\n");
  REQUIRE(ds.size() == 5);
  CHECK(ds[0].name == "--job-name");
  CHECK(ds[0].value == "alpha");
  CHECK(ds[0].line == 2);
  CHECK(ds[0].text == "#SBATCH --job-name=alpha");
  CHECK(ds[1].name == "--time");
  CHECK(ds[1].value == "10:00");
  CHECK(ds[1].line == 3);
  CHECK(ds[2].name == "-N");
  CHECK(ds[2].value == "4");
  CHECK(ds[3].name == "-N");
  CHECK(ds[3].value == "4");
  CHECK(ds[3].line == 5);
  CHECK(ds[4].name == "--max-power");
  CHECK(ds[4].value == "250");
  CHECK(ds[4].line == 6);
}

TEST_CASE("directives: several options on one line", "[directives]") {
  auto ds = parse("#SBATCH -N 2 -t 5 --rigid -J x\n");
  REQUIRE(ds.size() == 4);
  CHECK(ds[0].name == "-N");
  CHECK(ds[0].value == "2");
  CHECK(ds[1].name == "-t");
  CHECK(ds[1].value == "5");
  CHECK(ds[2].name == "--rigid");
  CHECK(ds[2].value == "");
  CHECK(ds[3].name == "-J");
  CHECK(ds[3].value == "x");
  for (auto& d : ds) CHECK(d.line == 1);
}

TEST_CASE("directives: quotes", "[directives]") {
  auto ds = parse(
      "#SBATCH --job-name=\"my job\"\n"
      "#SBATCH -J 'single quoted # not a comment'\n"
      "#SBATCH --output \"out dir/%j.txt\"\n"
      "#SBATCH --job-name=a\"b c\"d\n");
  REQUIRE(ds.size() == 4);
  CHECK(ds[0].value == "my job");
  CHECK(ds[1].value == "single quoted # not a comment");
  CHECK(ds[2].name == "--output");
  CHECK(ds[2].value == "out dir/%j.txt");
  CHECK(ds[3].value == "ab cd");
}

TEST_CASE("directives: unterminated quote names the line", "[directives]") {
  REQUIRE_THROWS_AS(parse("#!/bin/sh\n#SBATCH -J \"oops\n"), SpecError);
  REQUIRE_THROWS_WITH(parse("#!/bin/sh\n#SBATCH -J \"oops\n"), Contains("line 2") && Contains("quote"));
}

TEST_CASE("directives: trailing comments", "[directives]") {
  auto ds = parse(
      "#SBATCH -N 2   # two nodes\n"
      "#SBATCH --time=5 #five minutes\n"
      "#SBATCH # only a comment\n");
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].value == "2");
  CHECK(ds[1].value == "5");
}

TEST_CASE("directives: stop at the first command", "[directives]") {
  auto ds = parse(
      "#!/bin/bash\n"
      "\n"
      "# an ordinary comment\n"
      "   #SBATCH -J indented\n"
      "#SBATCH -N 2\n"
      "echo hello\n"
      "#SBATCH -N 3\n"
      "#SBATCH --bogus\n");
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].value == "indented");
  CHECK(ds[0].line == 4);
  CHECK(ds[1].value == "2");
  CHECK(ds[1].line == 5);
}

TEST_CASE("directives: look-alike comments are not directives", "[directives]") {
  auto ds = parse("#SBATCHX -N 2\n#MJX -N 3\n# SBATCH -N 4\n##SBATCH -N 5\n#SBATCH\n");
  CHECK(ds.empty());
}

TEST_CASE("directives: malformed lines report their line number", "[directives]") {
  SECTION("a word that is not an option") {
    REQUIRE_THROWS_WITH(parse("#!/bin/sh\n#SBATCH -N 2\n#SBATCH nodes=2\n"),
                        Contains("line 3") && Contains("nodes=2"));
  }
  SECTION("an option without its value at the end of the line") {
    REQUIRE_THROWS_WITH(parse("#!/bin/sh\n\n#SBATCH --time\n"), Contains("line 3") && Contains("--time") &&
                                                                     Contains("needs a value"));
  }
}

TEST_CASE("directives: unknown directive names the line and the option", "[directives]") {
  std::string script = "#!/bin/bash\n#SBATCH -N 1\n#SBATCH --bogus\ntrue\n";
  REQUIRE_THROWS_AS(parse(script), SpecError);  // known when the line is read: its value is not taken for a word
  REQUIRE_THROWS_WITH(spec_of(script), Contains("line 3") && Contains("--bogus") && Contains("unrecognized option"));
}

TEST_CASE("directives: bad values name the line and the option", "[directives]") {
  REQUIRE_THROWS_WITH(spec_of("#!/bin/sh\n#SBATCH -N abc\n"), Contains("line 2") && Contains("--nodes") &&
                                                                  Contains("abc"));
  REQUIRE_THROWS_WITH(spec_of("#SBATCH --time=1:x9\n"), Contains("line 1") && Contains("--time") && Contains("1:x9"));
  REQUIRE_THROWS_WITH(spec_of("#!/bin/sh\n#MJ --min-power=-3\n"), Contains("line 2") && Contains("--min-power"));
  REQUIRE_THROWS_WITH(spec_of("#MJ --node-constraint=prime\n"), Contains("--node-constraint") && Contains("prime"));
  REQUIRE_THROWS_WITH(spec_of("#SBATCH --job-name=\n"), Contains("line 1") && Contains("needs a value"));
}

TEST_CASE("directives: aliases of the invasic names", "[directives]") {
  auto s = spec_of(
      "#!/bin/bash\n"
      "#MJ --min-nodes-invasic=2\n"
      "#MJ --max-nodes-invasic 6\n"
      "#MJ --node-constraints=even\n");
  REQUIRE(s.min_nodes);
  REQUIRE(s.max_nodes);
  CHECK(*s.min_nodes == 2);
  CHECK(*s.max_nodes == 6);
  CHECK(s.constraint.value_or("") == "even");

  auto t = spec_of("#MJ --min-nodes 3 --max-nodes=5 --node-constraint odd\n");
  CHECK(t.min_nodes.value_or(0) == 3);
  CHECK(t.max_nodes.value_or(0) == 5);
  CHECK(t.constraint.value_or("") == "odd");
}

TEST_CASE("directives: values reach the spec", "[directives]") {
  auto s = spec_of(
      "#!/bin/bash\n"
      "#SBATCH -J name1\n"
      "#SBATCH --job-name name2\n"   // later wins
      "#SBATCH -N 2-4\n"
      "#SBATCH -t 1-02:03:04\n"
      "#SBATCH -o out-%j.txt -e err-%x.txt\n"
      "#SBATCH -D /tmp\n"
      "#SBATCH --ntasks-per-node=4 --exclusive --mem 4G\n"  // sbatch options
      "#MJ --min-power 50.5 --max-power=100\n");
  CHECK(s.name.value_or("") == "name2");
  CHECK(!s.nodes);
  CHECK(s.min_nodes.value_or(0) == 2);
  CHECK(s.max_nodes.value_or(0) == 4);
  CHECK(s.time_limit.value_or(0) == ((24 + 2) * 60 + 4) * 60);  // 1-02:03:04: seconds round up to a minute
  CHECK(s.output.value_or("") == "out-%j.txt");
  CHECK(s.error.value_or("") == "err-%x.txt");
  CHECK(s.chdir.value_or("") == "/tmp");
  CHECK(s.min_power.value_or(0) == Approx(50.5));
  CHECK(s.max_power.value_or(0) == Approx(100));
  CHECK(!s.rigid);
}

TEST_CASE("apply_option: command-line values", "[options]") {
  JobSpec s;
  apply_option(s, "-N", "3");
  CHECK(s.nodes.value_or(0) == 3);
  apply_option(s, "--nodes", "2-5");
  CHECK(s.min_nodes.value_or(0) == 2);
  CHECK(s.max_nodes.value_or(0) == 5);
  apply_option(s, "--rigid", "");
  CHECK(s.rigid);
  apply_option(s, "-t", "UNLIMITED");
  CHECK(s.time_limit.value_or(0) == -1);
  apply_option(s, "--time", "90");
  CHECK(s.time_limit.value_or(0) == 90 * 60);
  apply_option(s, "--time", "1:30");
  CHECK(s.time_limit.value_or(0) == 120);  // Slurm rounds seconds up to whole minutes

  REQUIRE_THROWS_WITH(apply_option(s, "--bogus", "1"), Contains("unrecognized option") && Contains("--bogus"));
  REQUIRE_THROWS_WITH(apply_option(s, "-N", "0"), Contains("--nodes"));
  REQUIRE_THROWS_WITH(apply_option(s, "-N", "x"), Contains("--nodes") && Contains("'x'"));
  REQUIRE_THROWS_WITH(apply_option(s, "-N", "-3"), Contains("--nodes"));
  REQUIRE_THROWS_WITH(apply_option(s, "-N", "2-"), Contains("--nodes"));
  REQUIRE_THROWS_WITH(apply_option(s, "-N", ""), Contains("--nodes") && Contains("needs a value"));
  REQUIRE_THROWS_WITH(apply_option(s, "--rigid", "yes"), Contains("--rigid"));
  apply_option(s, "-t", "0");  // as Slurm: zero means no limit
  CHECK(s.time_limit.value_or(0) == -1);
  REQUIRE_THROWS_WITH(apply_option(s, "-t", "abc"), Contains("--time") && Contains("abc"));
  REQUIRE_THROWS_WITH(apply_option(s, "-t", "1:9x"), Contains("--time") && Contains("1:9x"));
  REQUIRE_THROWS_WITH(apply_option(s, "--min-power", "-1"), Contains("--min-power") && Contains("negative"));
  REQUIRE_THROWS_WITH(apply_option(s, "--max-power", "lots"), Contains("--max-power") && Contains("lots"));
  REQUIRE_THROWS_WITH(apply_option(s, "--max-power", "12W"), Contains("--max-power") && Contains("12W"));
  REQUIRE_THROWS_WITH(apply_option(s, "--max-power", "nan"), Contains("--max-power"));
  REQUIRE_THROWS_WITH(apply_option(s, "--min-nodes-invasic", "0"), Contains("--min-nodes"));
  REQUIRE_THROWS_WITH(apply_option(s, "--node-constraints", "prime"), Contains("--node-constraint"));
  // ignored sbatch options are accepted
  REQUIRE_NOTHROW(apply_option(s, "--ntasks-per-node", "4"));
  REQUIRE_NOTHROW(apply_option(s, "-p", "batch"));
}

TEST_CASE("job_options: every option has a long name and help", "[options]") {
  for (auto& o : job_options()) {
    REQUIRE(!o.names.empty());
    CHECK(o.names.back().rfind("--", 0) == 0);
    CHECK(!o.help.empty());
  }
}

// sbatch precedence: the command line wins field by field, whatever the order
// in which options are applied; -N is one field (count or range).
TEST_CASE("merge_specs: command line over script, field by field", "[options]") {
  auto script = spec_of(
      "#!/bin/bash\n"
      "#SBATCH -N 2-8\n"
      "#SBATCH -J fromscript -t 10 -o s.out\n"
      "#MJ --node-constraint even --max-power 90\n");
  JobSpec cli;
  apply_option(cli, "-t", "5");
  apply_option(cli, "-N", "4");
  auto m = merge_specs(script, cli);
  CHECK(m.nodes.value_or(0) == 4);
  CHECK(!m.min_nodes);
  CHECK(!m.max_nodes);
  CHECK(m.time_limit.value_or(0) == 300);
  CHECK(m.name.value_or("") == "fromscript");
  CHECK(m.output.value_or("") == "s.out");
  CHECK(m.constraint.value_or("") == "even");
  CHECK(m.max_power.value_or(0) == Approx(90));
  auto j = resolve_job(m, 8, "x", "d", "/tmp");
  CHECK(j.kind == "rigid");
  CHECK(j.req_nodes == 4);

  // a command-line range replaces a script count; --min-nodes alone only the minimum
  JobSpec cli2;
  apply_option(cli2, "--min-nodes", "3");
  auto m2 = merge_specs(script, cli2);
  CHECK(m2.min_nodes.value_or(0) == 3);
  CHECK(m2.max_nodes.value_or(0) == 8);
  JobSpec cli3;
  apply_option(cli3, "-N", "1-2");
  auto count_script = spec_of("#SBATCH -N 6 --rigid\n");
  auto m3 = merge_specs(count_script, cli3);
  CHECK(!m3.nodes);
  CHECK(m3.min_nodes.value_or(0) == 1);
  CHECK(m3.max_nodes.value_or(0) == 2);
  CHECK_FALSE(m3.rigid);
  // -t 0 is unlimited; --wrap only on the command line
  JobSpec t0;
  apply_option(t0, "-t", "0");
  CHECK(resolve_job(merge_specs(script, t0), 8, "x", "d", "/tmp").time_limit == -1);
  REQUIRE_THROWS_WITH(spec_of("#SBATCH --wrap=hostname\n"), Contains("--wrap") && Contains("command line"));
}
