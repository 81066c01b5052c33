// iCheck controller: the controller lease, epochs and fenced transactions on the state file.
#include "controller_impl.hpp"

namespace dynres::icheck::ctl {

void Controller::take_lease(bool takeover) {
  std::lock_guard<std::mutex> g(mu_);
  db_->write_tx([&] {
    TxDepth depth;
    if (takeover) {
      Stmt(*db_, "UPDATE icheck_nodes SET last_heartbeat = ? WHERE state = 'up'").bind(1, wall()).run();
      Stmt(*db_, "UPDATE icheck_nodes SET relaunch_at = ? WHERE state = 'relaunching'").bind(1, wall()).run();
    }
    int64_t cur = 0;
    {
      Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
      if (q.step()) cur = q.i64(0);
    }
    epoch_ = cur + 1;
    Stmt(*db_, "INSERT INTO icheck_controller(id, address, pid, heartbeat, epoch) VALUES(1, ?, ?, ?, ?) "
               "ON CONFLICT(id) DO UPDATE SET address = excluded.address, pid = excluded.pid, "
               "heartbeat = excluded.heartbeat, epoch = excluded.epoch")
        .bind(1, addr_).bind(2, int64_t(::getpid())).bind(3, wall()).bind(4, epoch_).run();
  });
  std::fprintf(stderr, "icheckd controller: active with epoch %lld\n", (long long)epoch_);
}

void Controller::lease_loop(std::atomic<bool>* stop) {
  while (!*stop) {
    try {
      Stmt(*lease_db_, "UPDATE icheck_controller SET heartbeat = ? WHERE id = 1 AND epoch = ?")
          .bind(1, wall()).bind(2, epoch_).run();
      if (lease_db_->changes() == 0) fence("the lease");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "icheckd controller: lease: %s\n", e.what());
    }
    for (int i = 0; i < int(cfg_.heartbeat_interval * 5) && !*stop; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void Controller::fence(const char* where) {
  int64_t cur = -1;
  try {
    Stmt q(*lease_db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
    if (q.step()) cur = q.i64(0);
  } catch (...) {
  }
  if (!fenced_.exchange(true))
    std::fprintf(stderr, "icheckd controller: fenced (%s): epoch %lld holds the state file, this one has %lld; stopping\n",
                 where, (long long)cur, (long long)epoch_);
  fenced_by_ = cur;
  if (stop_) *stop_ = true;
}

void Controller::check_epoch() {
  if (fenced_) throw std::runtime_error("fenced: this controller was superseded by a newer one");
  Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
  if (q.step() && q.i64(0) == epoch_) return;
  fence("a request");
  throw std::runtime_error("fenced: this controller was superseded by a newer one");
}

void Controller::tx(const std::function<void()>& fn) {
  if (tx_depth_ > 0) {
    fn();
    return;
  }
  db_->write_tx([&] {
    if (fenced_) throw Fenced("fenced: this controller was superseded by a newer one");
    int64_t cur = -1;
    {
      Stmt q(*db_, "SELECT epoch FROM icheck_controller WHERE id = 1");
      if (q.step()) cur = q.i64(0);
    }
    if (cur != epoch_) {
      fence("a state write");
      throw Fenced("fenced: controller epoch " + std::to_string(cur) + " holds the state file, this one has " +
                   std::to_string(epoch_) + "; change refused");
    }
    TxDepth depth;
    fn();
  });
}

int Controller::authorize(void*, int action, const char*, const char*, const char*, const char*) {
  if ((action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE) && tx_depth_ == 0)
    return SQLITE_DENY;
  return SQLITE_OK;
}

}  // namespace dynres::icheck::ctl
