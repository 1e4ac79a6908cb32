// Sharing blocks between processes, on simulated devices: the exporter keeps a
// shared block from reuse while any importer holds it, in this process or in a
// child process that exits or is killed.
#include "memkit/sharing.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "memkit/memkit.hpp"

namespace memkit {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;
constexpr std::chrono::milliseconds kPatience{20'000};  // how long to wait for a condition

std::string make_socket_path() {
  static std::atomic<int> next{0};
  return "@memkit-sharing-test-" + std::to_string(::getpid()) + "-" + std::to_string(next++);
}

class SharingTest : public ::testing::TestWithParam<pool_policy> {
 protected:
  SharingTest() {
    sim_options o;
    o.capacity = std::size_t{1} << 30;
    exporter_device = std::make_unique<sim_backend>(o);
    o.device = 1;
    importer_device = std::make_unique<sim_backend>(o);
    device_set_options options;
    options.allocator.policy = GetParam();
    options.allocator.validate = true;
    options.allocator.thread_cache = false;
    std::vector<backend*> devices{exporter_device.get()};
    set = std::make_unique<device_set>(devices, options);
    exporter = std::make_unique<memory_exporter>(*set, make_socket_path());
  }
  ~SharingTest() override {
    exporter.reset();
    set.reset();
  }
  std::unique_ptr<sim_backend> exporter_device, importer_device;
  std::unique_ptr<device_set> set;
  std::unique_ptr<memory_exporter> exporter;
};

TEST_P(SharingTest, AnImportHoldsTheBlockUntilClosed) {
  const device_allocation block = set->allocate(0, 8 * kMiB);
  const std::uint64_t id = exporter->share(block);
  EXPECT_EQ(exporter_device->get_counters().exports, 1u);  // checked when shared
  {
    imported_memory imported(*importer_device, exporter->get_socket_path(), id);
    EXPECT_EQ(imported.get_address(), block.address);
    EXPECT_EQ(imported.get_size(), block.size);
    EXPECT_EQ(imported.get_description().type, shared_memory::kind::sim);
    EXPECT_EQ(importer_device->get_import_count(), 1u);
    ASSERT_TRUE(exporter->wait_for_importers(id, 1, kPatience));
    EXPECT_EQ(exporter->get_importer_count(id), 1u);

    exporter->release(id);  // the owner is done, the importer is not
    EXPECT_TRUE(exporter->is_held(id));
    EXPECT_EQ(set->get_statistics(0).live_blocks, 1u);
    const device_allocation other = set->allocate(0, 8 * kMiB);
    EXPECT_NE(other.address, block.address);  // not reused while imported
    set->free(other);
    // Released: no new imports.
    EXPECT_THROW(imported_memory(*importer_device, exporter->get_socket_path(), id),
                 invalid_argument);
  }
  EXPECT_EQ(importer_device->get_import_count(), 0u);
  ASSERT_TRUE(exporter->wait_until_unimported(id, kPatience));
  EXPECT_FALSE(exporter->is_held(id));
  EXPECT_EQ(set->get_statistics(0).live_blocks, 0u);
  const device_allocation again = set->allocate(0, 8 * kMiB);
  EXPECT_EQ(again.address, block.address);  // reused once nobody holds it
  set->free(again);
}

TEST_P(SharingTest, ReleasedWithoutImportersGoesBackAtOnce) {
  const device_allocation block = set->allocate(0, 4 * kMiB);
  const std::uint64_t id = exporter->share(block);
  exporter->release(id);
  EXPECT_FALSE(exporter->is_held(id));
  EXPECT_EQ(set->get_statistics(0).live_blocks, 0u);
  EXPECT_THROW(exporter->release(id), invalid_argument);
  try {
    imported_memory imported(*importer_device, exporter->get_socket_path(), id);
    FAIL() << "imported a released block";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("is not shared"), std::string::npos) << e.what();
  }
  EXPECT_THROW(imported_memory(*importer_device, exporter->get_socket_path(), 12345),
               invalid_argument);
}

TEST_P(SharingTest, TwoImportersBothHoldTheBlock) {
  const device_allocation block = set->allocate(0, 3 * kMiB);
  const std::uint64_t id = exporter->share(block);
  auto first = std::make_unique<imported_memory>(*importer_device, exporter->get_socket_path(), id);
  auto second =
      std::make_unique<imported_memory>(*importer_device, exporter->get_socket_path(), id);
  ASSERT_TRUE(exporter->wait_for_importers(id, 2, kPatience));
  exporter->release(id);
  first.reset();
  EXPECT_TRUE(exporter->is_held(id));  // the second still holds it
  second.reset();
  ASSERT_TRUE(exporter->wait_until_unimported(id, kPatience));
  EXPECT_FALSE(exporter->is_held(id));
  EXPECT_EQ(set->get_statistics(0).live_blocks, 0u);
}

TEST_P(SharingTest, DestroyingTheExporterGivesBlocksBack) {
  const device_allocation block = set->allocate(0, 2 * kMiB);
  exporter->share(block);
  EXPECT_EQ(exporter->get_held_count(), 1u);
  exporter.reset();
  EXPECT_EQ(set->get_statistics(0).live_blocks, 0u);
}

// The child is this test binary run again (posix_spawn, not a bare fork of a
// process with the exporter's thread in it), told by MEMKIT_SHARING_CHILD what to
// import: "SOCKET ID ADDRESS KILL FD". It writes '0' to FD once the import is
// mapped at ADDRESS, then exits without closing it or waits to be killed.
constexpr const char* kChildVariable = "MEMKIT_SHARING_CHILD";

int run_child_if_asked() {
  const char* job = std::getenv(kChildVariable);
  if (!job) return 0;
  char socket_path[256] = {};
  unsigned long long id = 0, address = 0;
  int kill_it = 0, fd = -1;
  int status = 1;
  if (std::sscanf(job, "%255s %llu %llu %d %d", socket_path, &id, &address, &kill_it, &fd) != 5) {
    ::_exit(5);
  }
  ::alarm(60);  // never outlives a parent that stopped waiting
  try {
    sim_options o;
    o.device = 2;
    sim_backend own(o);  // the child's device
    auto* imported = new imported_memory(own, socket_path, id);
    status = imported->get_address() == address ? 0 : 2;
    const char byte = static_cast<char>('0' + status);
    if (::write(fd, &byte, 1) != 1) status = 3;
    // Never closed: the process's end closes the connection.
    if (kill_it) {
      for (;;) ::pause();
    }
  } catch (...) {
    status = 4;
  }
  ::_exit(status);
}
const int child_ran = run_child_if_asked();  // before main, in the child only

// Waits for the child's exit up to kPatience; kills it after that.
bool wait_for_child(pid_t child, int& status) {
  const auto deadline = std::chrono::steady_clock::now() + kPatience;
  while (std::chrono::steady_clock::now() < deadline) {
    const pid_t got = ::waitpid(child, &status, WNOHANG);
    if (got == child) return true;
    if (got < 0) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(child, SIGKILL);
  ::waitpid(child, &status, 0);
  return false;
}

// Starts a child that imports the block and then exits without closing, or waits
// to be killed; the parent sees the block held and come back only after.
void share_with_child(memory_exporter& exporter, device_set& set, bool kill_it) {
  const device_allocation block = set.allocate(0, 8 * kMiB);
  const std::uint64_t id = exporter.share(block);
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);  // not close-on-exec: the child writes to ready[1]
  const std::string job = exporter.get_socket_path() + " " + std::to_string(id) + " " +
                          std::to_string(block.address) + " " + (kill_it ? "1" : "0") + " " +
                          std::to_string(ready[1]);
  const std::string variable = std::string(kChildVariable) + "=" + job;
  char* child_argv[] = {const_cast<char*>("memkit_tests"), nullptr};
  char* child_env[] = {const_cast<char*>(variable.c_str()), nullptr};
  pid_t child = -1;
  const int spawned =
      ::posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, child_argv, child_env);
  ::close(ready[1]);
  ASSERT_EQ(spawned, 0) << std::strerror(spawned);
  pollfd wait_ready{ready[0], POLLIN, 0};
  const int polled = ::poll(&wait_ready, 1, static_cast<int>(kPatience.count()));
  char byte = 0;
  const bool got_byte = polled == 1 && ::read(ready[0], &byte, 1) == 1;
  ::close(ready[0]);
  if (!got_byte) ::kill(child, SIGKILL);
  ASSERT_TRUE(got_byte) << "the child did not report its import within " << kPatience.count()
                        << " ms";
  EXPECT_EQ(byte, '0');
  // A child that exits may be gone before the import is counted: wait only for
  // one that stays.
  if (kill_it) {
    ASSERT_TRUE(exporter.wait_for_importers(id, 1, kPatience));
  }
  exporter.release(id);
  if (kill_it) {
    EXPECT_TRUE(exporter.is_held(id));
    const device_allocation other = set.allocate(0, 8 * kMiB);
    EXPECT_NE(other.address, block.address);
    set.free(other);
    ASSERT_EQ(::kill(child, SIGKILL), 0);
  }
  int status = 0;
  ASSERT_TRUE(wait_for_child(child, status))
      << "the child did not end within " << kPatience.count() << " ms";
  if (kill_it) {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  } else {
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ASSERT_TRUE(exporter.wait_until_unimported(id, kPatience));
  EXPECT_FALSE(exporter.is_held(id));
  EXPECT_EQ(set.get_statistics(0).live_blocks, 0u);
  const device_allocation again = set.allocate(0, 8 * kMiB);
  EXPECT_EQ(again.address, block.address);
  set.free(again);
}

TEST_P(SharingTest, ChildThatExitsLetsTheBlockGo) { share_with_child(*exporter, *set, false); }

TEST_P(SharingTest, ChildThatIsKilledLetsTheBlockGo) { share_with_child(*exporter, *set, true); }

TEST(SharingErrors, DevicesThatCannotShareAreNamed) {
  cpu_backend cpu;
  std::vector<backend*> devices{&cpu};
  device_set set(devices);
  memory_exporter exporter(set, make_socket_path());
  const device_allocation block = set.allocate(0, 4096);
  try {
    exporter.share(block);
    FAIL() << "the cpu backend shared memory";
  } catch (const invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("memkit::memory_sharing"), std::string::npos) << e.what();
  }
  EXPECT_THROW(imported_memory(cpu, exporter.get_socket_path(), 1), invalid_argument);
  sim_backend sim;
  EXPECT_THROW(imported_memory(sim, "@memkit-no-such-socket", 1), os_error);
  EXPECT_THROW(sim.export_memory(12345, 64), invalid_argument);  // not held
  set.free(block);
}

INSTANTIATE_TEST_SUITE_P(Policies, SharingTest,
                         ::testing::Values(pool_policy::segments, pool_policy::arena),
                         [](const auto& param_info) {
                           return param_info.param == pool_policy::arena ? "arena" : "segments";
                         });

}  // namespace
}  // namespace memkit
