// The resize protocol's state machine: identity, registration rules,
// orders, commits, timeouts with rollback and back-off, IS_ADAPTING.
#include <catch2/catch.hpp>

#include "dynres/resize.hpp"

using namespace dynres::resize;
using Catch::Matchers::Contains;
using S = std::vector<std::string>;

namespace {
Book booked(Options o = {}) {
  Book b(o);
  b.admit(7, 1000, "s3cret", {"n3", "n1", "n2"});
  b.admit(8, 1001, "other", {"n4"});
  return b;
}
const Peer kOwner{1000, 7, "s3cret"};
}  // namespace

TEST_CASE("only the job's owner with its secret speaks for it") {
  Book b = booked();
  CHECK_THAT(b.register_job({1000, 7, "wrong"}).error, Contains("wrong secret"));
  CHECK_THAT(b.register_job({1000, 7, ""}).error, Contains("wrong secret"));
  CHECK_THAT(b.register_job({1000, 7, "s3cre"}).error, Contains("wrong secret"));
  CHECK_THAT(b.register_job({1001, 7, "s3cret"}).error, Contains("uid 1001 may not speak for job 7"));
  CHECK_THAT(b.register_job({1000, 9, "s3cret"}).error, Contains("job 9 is not running"));
  CHECK_THAT(b.register_job({1000, 8, "s3cret"}).error, Contains("may not speak for job 8"));
  CHECK(b.phase(7) == Phase::rigid);  // refused requests change nothing
  CHECK(b.register_job(kOwner).ok);
  CHECK(b.phase(7) == Phase::accepting);
  CHECK(b.register_job(kOwner).ok);  // twice is fine
}

TEST_CASE("a job is rigid until it registers and can never register again after deregistering") {
  Book b = booked();
  std::string why;
  CHECK_FALSE(b.order(7, Kind::expand, {"n5"}, 0, 10, &why));
  CHECK(why == "job is rigid");
  REQUIRE(b.register_job(kOwner).ok);
  CHECK(b.can_order(7, 10));
  REQUIRE(b.deregister(kOwner, 10).ok);
  CHECK(b.phase(7) == Phase::closed);
  CHECK_FALSE(b.can_order(7, 11));
  CHECK_THAT(b.register_job(kOwner).error, Contains("cannot register again"));
  CHECK_FALSE(b.order(7, Kind::shrink, {"n1"}, 0, 12, &why));
  CHECK(why == "job is closed");
}

TEST_CASE("expand: ordered, committed, nodes added; one order at a time (IS_ADAPTING)") {
  Book b = booked();
  REQUIRE(b.register_job(kOwner).ok);
  CHECK_FALSE(b.any_adapting());
  auto o = b.order(7, Kind::expand, {"n6", "n5"}, 0, 100);
  REQUIRE(o);
  CHECK(o->nodes == S{"n5", "n6"});
  CHECK(o->deadline == 130);
  CHECK(b.any_adapting());
  CHECK(b.phase(7) == Phase::adapting);
  std::string why;
  CHECK_FALSE(b.order(7, Kind::shrink, {"n1"}, 0, 101, &why));  // one outstanding order per job
  CHECK(why == "job is adapting");
  CHECK(b.nodes(7) == S{"n1", "n2", "n3"});  // nothing changes before the commit
  CHECK_THAT(b.commit({1000, 7, "s3cret"}, o->id + 1, {}, 105).error, Contains("is not outstanding"));
  CHECK_THAT(b.commit({1001, 7, "s3cret"}, o->id, {}, 105).error, Contains("may not speak"));
  Commit c;
  REQUIRE(b.commit(kOwner, o->id, {}, 105.5, &c).ok);
  CHECK(c.duration == Approx(5.5));
  CHECK(b.nodes(7) == S{"n1", "n2", "n3", "n5", "n6"});
  CHECK_FALSE(b.any_adapting());
  CHECK_THAT(b.commit(kOwner, o->id, {}, 106).error, Contains("is not outstanding"));  // settled once
}

TEST_CASE("shrink by nodes or by count (the job chooses, [Finnerty24] preShrink)") {
  Book b = booked();
  REQUIRE(b.register_job(kOwner).ok);
  std::string why;
  CHECK_FALSE(b.order(7, Kind::shrink, {"n9"}, 0, 1, &why));
  CHECK(why == "the job does not hold n9");
  CHECK_FALSE(b.order(7, Kind::shrink, {}, 0, 1, &why));
  CHECK(why == "a shrink names either the nodes or a count");
  CHECK_FALSE(b.order(7, Kind::shrink, {"n1"}, 1, 1, &why));
  CHECK(why == "a shrink names either the nodes or a count");
  CHECK_FALSE(b.order(7, Kind::shrink, {}, 3, 1, &why));
  CHECK(why == "a shrink must leave the job at least one node");
  CHECK_FALSE(b.order(7, Kind::expand, {"n2"}, 0, 1, &why));
  CHECK(why == "the job already holds n2");
  CHECK_FALSE(b.order(7, Kind::expand, {"n5", "n5"}, 0, 1, &why));
  CHECK(why == "a node is named twice");
  CHECK_FALSE(b.any_adapting());  // refused orders leave nothing outstanding

  auto o = b.order(7, Kind::shrink, {}, 2, 10);
  REQUIRE(o);
  CHECK_THAT(b.commit(kOwner, o->id, {"n1"}, 11).error, Contains("asked for 2 nodes, 1 were released"));
  CHECK_THAT(b.commit(kOwner, o->id, {"n1", "n9"}, 11).error, Contains("does not hold n9"));
  CHECK_THAT(b.commit(kOwner, o->id, {"n1", "n1"}, 11).error, Contains("named twice"));
  Commit c;
  REQUIRE(b.commit(kOwner, o->id, {"n3", "n1"}, 12, &c).ok);
  CHECK(c.released == S{"n1", "n3"});
  CHECK(b.nodes(7) == S{"n2"});

  b.admit(7, 1000, "s3cret", {"n1", "n2", "n3"});
  REQUIRE(b.register_job(kOwner).ok);
  auto q = b.order(7, Kind::shrink, {"n3"}, 0, 20);
  REQUIRE(q);
  CHECK_THAT(b.commit(kOwner, q->id, {"n2"}, 21).error, Contains("differ from the order's"));
  REQUIRE(b.commit(kOwner, q->id, {}, 21, &c).ok);
  CHECK(c.released == S{"n3"});
  CHECK(b.nodes(7) == S{"n1", "n2"});
}

TEST_CASE("an order not committed in time is rolled back, then the job backs off") {
  Book b = booked({.timeout = 10, .backoff = 60});
  REQUIRE(b.register_job(kOwner).ok);
  auto o = b.order(7, Kind::expand, {"n5"}, 0, 100);
  REQUIRE(o);
  CHECK(b.expire(110).empty());  // at the deadline: still in time
  CHECK_THAT(b.commit(kOwner, o->id, {}, 110.5).error, Contains("timed out"));
  CHECK(b.any_adapting());  // the late commit changed nothing
  auto gone = b.expire(110.5);
  REQUIRE(gone.size() == 1);
  CHECK(gone[0].id == o->id);
  CHECK(gone[0].nodes == S{"n5"});
  CHECK_FALSE(b.any_adapting());
  CHECK(b.nodes(7) == S{"n1", "n2", "n3"});  // the job keeps its old nodes
  CHECK(b.phase(7) == Phase::accepting);
  CHECK_FALSE(b.can_order(7, 170));  // back-off: 110.5 + 60
  std::string why;
  CHECK_FALSE(b.order(7, Kind::expand, {"n5"}, 0, 170, &why));
  CHECK(why == "job is in back-off after a rolled-back order");
  CHECK(b.can_order(7, 170.5));
  CHECK(b.expire(1000).empty());
}

TEST_CASE("deregistering with an order outstanding rolls it back; a job's end forgets it") {
  Book b = booked();
  REQUIRE(b.register_job(kOwner).ok);
  auto o = b.order(7, Kind::shrink, {"n3"}, 0, 5);
  REQUIRE(o);
  std::vector<Order> back;
  REQUIRE(b.deregister(kOwner, 6, &back).ok);
  REQUIRE(back.size() == 1);
  CHECK(back[0].id == o->id);
  CHECK_FALSE(b.any_adapting());
  CHECK(b.nodes(7) == S{"n1", "n2", "n3"});
  b.admit(9, 1000, "x", {"n7"});
  Book c = booked();
  REQUIRE(c.register_job(kOwner).ok);
  REQUIRE(c.order(7, Kind::expand, {"n5"}, 0, 1));
  c.forget(7);
  CHECK_FALSE(c.any_adapting());
  CHECK(c.phase(7) == Phase::closed);
  CHECK_THAT(c.register_job(kOwner).error, Contains("is not running"));
}
