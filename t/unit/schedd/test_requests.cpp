// The tools' requests to mjsched (dynres/requests.hpp) on a real state file:
// who may do what is the peer's identity, never the message's; every member
// is type- and range-checked; hold/release is all or nothing; non-UTF-8
// bytes travel intact and replies never fail over them.
#include <unistd.h>

#include <cmath>

#include "dynres/paths.hpp"
#include "dynres/jobspec.hpp"
#include "dynres/requests.hpp"
#include "testutil.hpp"

using namespace dynres;
using namespace dynres::schedd;

namespace {

struct Cluster {
  test::TempDir dir{"requests"};
  std::unique_ptr<State> st;
  Cluster() {
    st = std::make_unique<State>(state_path(dir.path.string()), true);
    st->register_nodes({{"n1", "localhost"}, {"n2", "localhost"}});
  }
  Ctx ctx(uint32_t owner) { return Ctx{*st, dir.path.string(), Config{}, Authority{owner}}; }
};

json submit_req(const std::string& script) {
  return {{"op", "submit"},
          {"script", encode_bytes(script)},
          {"default_name", "t"},
          {"cwd", "/tmp"},
          {"options", json::array({json::array({"--output", "/dev/null"})})},
          {"environment", json::array({"PATH=/bin", "SBATCH_JOB_NAME=from-env"})},
          {"umask", 077}};
}

}  // namespace

TEST_CASE("bytes that are not UTF-8 travel as base64 and come back intact") {
  for (std::string s : {std::string(""), std::string("plain"), std::string("caf\xe9"), std::string("\xff\xfe\x00x", 4),
                        std::string("ab\xc3")}) {
    CHECK(decode_bytes(encode_bytes(s)) == s);
    CHECK_NOTHROW(encode_bytes(s).dump());
  }
  CHECK(encode_bytes("plain").is_string());
  CHECK(encode_bytes("caf\xe9").is_object());
  CHECK_THROWS(decode_bytes(json{{"base64", "a"}}));
  CHECK_THROWS(decode_bytes(json{{"base64", "!!!!"}}));
  CHECK_THROWS(decode_bytes(json(5)));
}

TEST_CASE("Authority: the owner and root are admins; others act on their own jobs only") {
  Authority a{1000};
  CHECK(a.is_admin({0, 0, 1}));
  CHECK(a.is_admin({1000, 1000, 1}));
  CHECK_FALSE(a.is_admin({1001, 1001, 1}));
  CHECK(a.may_act_on({1001, 1001, 1}, 1001));
  CHECK_FALSE(a.may_act_on({1001, 1001, 1}, 1000));
  CHECK(a.may_act_on({1000, 1000, 1}, 1001));
  // an ordinary user's daemon runs jobs as itself: only its owner submits
  CHECK(a.may_submit({1000, 1000, 1}).empty());
  CHECK_FALSE(a.may_submit({1001, 1001, 1}).empty());
  CHECK_FALSE(a.may_submit({0, 0, 1}).empty());
  // root's daemon runs each job as its submitter
  CHECK(Authority{0}.may_submit({1001, 1001, 1}).empty());
}

TEST_CASE("submit records the peer's uid and gid and the umask, not the daemon's") {
  Cluster c;
  auto ctx = c.ctx(0);
  auto r = handle_request(ctx, Peer{4242, 4343, 1}, submit_req("#!/bin/sh\ntrue\n"));
  REQUIRE(r);
  REQUIRE(r->value("rc", 1) == 0);
  auto j = c.st->job((*r)["job"]["job_id"].get<int64_t>());
  REQUIRE(j);
  CHECK(j->uid == 4242);
  CHECK(j->gid == 4343);
  CHECK(j->umask == 077);
  CHECK(j->name == "from-env");  // SBATCH_JOB_NAME from the submitter's environment, not the daemon's
  CHECK(ctx.wake);
}

TEST_CASE("submit: a script that is not UTF-8 is stored byte for byte; the reply is valid JSON") {
  Cluster c;
  auto ctx = c.ctx(0);
  std::string script = "#!/bin/sh\necho caf\xe9\n";
  auto req = submit_req(script);
  req["options"].push_back(json::array({"--job-name", encode_bytes("n\xff")}));
  auto r = handle_request(ctx, Peer{1, 1, 1}, req);
  REQUIRE(r);
  REQUIRE(r->value("rc", 1) == 0);
  CHECK_NOTHROW(r->dump());
  CHECK(c.st->job((*r)["job"]["job_id"].get<int64_t>())->script == script);
}

TEST_CASE("submit: an ordinary user's daemon refuses other users, and nothing is recorded") {
  Cluster c;
  auto ctx = c.ctx(1000);
  auto r = handle_request(ctx, Peer{1001, 1001, 1}, submit_req("#!/bin/sh\ntrue\n"));
  REQUIRE(r);
  CHECK(r->value("rc", 0) == 1);
  CHECK(r->value("err", std::string()).find("permission denied") != std::string::npos);
  CHECK(c.st->jobs().empty());
}

TEST_CASE("submit: malformed members are refused by name, nothing is recorded") {
  Cluster c;
  auto ctx = c.ctx(0);
  auto bad = [&](const char* key, json v) {
    auto req = submit_req("#!/bin/sh\ntrue\n");
    req[key] = v;
    auto r = handle_request(ctx, Peer{1, 1, 1}, req);
    REQUIRE(r);
    INFO(key << " = " << v.dump() << " -> " << r->dump());
    CHECK((r->contains("error") || r->value("rc", 0) != 0));
  };
  bad("umask", 01000);
  bad("umask", -1);
  bad("umask", "022");
  bad("cwd", "relative");
  bad("cwd", 5);
  bad("environment", "PATH=/bin");
  bad("options", json::array({json::array({"--nodes"})}));
  bad("options", json::array({json::array({"--nodes", "-3"})}));
  bad("script", std::string(kMaxScriptBytes + 1, '#'));
  bad("script", json{{"base64", "%%%%"}});
  CHECK(c.st->jobs().empty());
  auto r = handle_request(ctx, Peer{1, 1, 1}, json::array());
  REQUIRE(r);
  CHECK(r->contains("error"));
  CHECK_FALSE(handle_request(ctx, Peer{1, 1, 1}, json{{"op", "ping"}}));  // the daemon's own op
}

TEST_CASE("hold/release: only the job's owner (or an admin); all or nothing") {
  Cluster c;
  auto ctx = c.ctx(1000);
  auto sub = [&](uint32_t uid) {
    auto root = c.ctx(0);
    auto req = submit_req("#!/bin/sh\ntrue\n");
    req["options"].push_back(json::array({"--hold", ""}));
    auto r = handle_request(root, Peer{uid, uid, 1}, req);
    REQUIRE(r->value("rc", 1) == 0);
    return (*r)["job"]["job_id"].get<int64_t>();
  };
  int64_t a = sub(1001), b = sub(1002);
  auto rel = [&](uint32_t uid, const std::string& ids) {
    return *handle_request(ctx, Peer{uid, uid, 1}, json{{"op", "release"}, {"ids", ids}});
  };
  auto r = rel(1002, std::to_string(a));
  CHECK(r.value("rc", 0) == 1);
  CHECK(r.value("err", std::string()).find("permission denied") != std::string::npos);
  CHECK(c.st->job(a)->held);
  // one unknown id: nothing released, each problem named
  r = rel(1001, std::to_string(a) + ",999");
  CHECK(r.value("rc", 0) == 1);
  CHECK(r.value("err", std::string()).find("invalid job id 999") != std::string::npos);
  CHECK(r.value("err", std::string()).find("no job was released") != std::string::npos);
  CHECK(c.st->job(a)->held);
  r = rel(1001, std::to_string(a));
  CHECK(r.value("rc", 1) == 0);
  CHECK_FALSE(c.st->job(a)->held);
  // the cluster's owner may release anyone's job
  CHECK(rel(1000, std::to_string(b)).value("rc", 1) == 0);
  CHECK_FALSE(c.st->job(b)->held);
}

TEST_CASE("cancel: another user's job is refused and stays pending") {
  Cluster c;
  auto root = c.ctx(0);
  auto r = handle_request(root, Peer{1001, 1001, 1}, submit_req("#!/bin/sh\ntrue\n"));
  int64_t a = (*r)["job"]["job_id"].get<int64_t>();
  r = handle_request(root, Peer{1002, 1002, 1}, json{{"op", "cancel"}, {"ids", {std::to_string(a)}}});
  CHECK(r->value("rc", 0) == 1);
  CHECK(c.st->job(a)->state == kPending);
  // scancel -u 1001 by 1002: refused (exit 1), nothing of 1001's is touched
  r = handle_request(root, Peer{1002, 1002, 1}, json{{"op", "cancel"}, {"uids", {1001}}});
  CHECK(r->value("rc", 0) == 1);
  CHECK(c.st->job(a)->state == kPending);
  r = handle_request(root, Peer{1001, 1001, 1}, json{{"op", "cancel"}, {"ids", {std::to_string(a)}}});
  CHECK(r->value("rc", 1) == 0);
  CHECK(c.st->job(a)->state == kCancelled);
}

TEST_CASE("admin requests: update_node and corridor_set are the owner's or root's") {
  Cluster c;
  auto ctx = c.ctx(1000);
  auto r = handle_request(ctx, Peer{1001, 1001, 1}, json{{"op", "node_cpus"}, {"nodes", json::array()}, {"cpus", 4}});
  CHECK(r->value("rc", 0) == 1);
  CHECK(c.st->node_cpus() == 1);
  r = handle_request(ctx, Peer{1000, 1000, 1}, json{{"op", "node_cpus"}, {"nodes", json::array()}, {"cpus", 4}});
  CHECK(r->value("rc", 1) == 0);
  CHECK(c.st->node_cpus() == 4);
  r = handle_request(ctx, Peer{1001, 1001, 1}, json{{"op", "corridor_set"}, {"lower", 100}, {"upper", 900}, {"force", true}});
  CHECK(r->value("rc", 0) == 1);
  CHECK(r->value("err", std::string()).find("permission denied") != std::string::npos);
  r = handle_request(ctx, Peer{0, 0, 1}, json{{"op", "corridor_set"}, {"lower", 100}, {"upper", std::nan("")}});
  CHECK(r->contains("error"));  // nan: not a finite number
}
