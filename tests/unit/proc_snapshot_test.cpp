// What /proc says of running processes when a recording attaches (userspace/session/
// proc_snapshot.h): a process's parent from its stat line, and a process's descendants.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "userspace/session/proc_snapshot.h"

namespace bpfprof {
namespace {

TEST(ProcSnapshot, TheParentFromAStatLineWhateverTheCommandName) {
  EXPECT_EQ(parent_in_stat("42 (php-fpm8.2) S 7 42 42 0 -1")->value, 7);
  // A name is the process's to choose: spaces and parentheses in it.
  EXPECT_EQ(parent_in_stat("42 (a) S 1 (b)) R 99 42 0")->value, 99);
  EXPECT_FALSE(parent_in_stat("42 (no end S 7"));
  EXPECT_FALSE(parent_in_stat("42 (x) S"));
  EXPECT_FALSE(parent_in_stat("42 (x) S -3 1"));
  EXPECT_FALSE(parent_in_stat(""));
}

// A child and a grandchild of this test are its descendants; this test is not its own.
TEST(ProcSnapshot, DescendantsAreChildrenAndTheirChildren) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (fork() == 0) {
      const pid_t me = getpid();
      (void)!write(ready[1], &me, sizeof(me));
      pause();
    }
    pause();
    _exit(0);
  }
  close(ready[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(read(ready[0], &grandchild, sizeof(grandchild)),
            static_cast<ssize_t>(sizeof(grandchild)));
  const std::vector<Pid> found = descendants_of({Pid{getpid()}});
  kill(grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(ready[0]);
  auto has = [&](pid_t pid) {
    return std::any_of(found.begin(), found.end(), [&](Pid p) { return p.value == pid; });
  };
  EXPECT_TRUE(has(child));
  EXPECT_TRUE(has(grandchild));
  EXPECT_FALSE(has(getpid()));
}

}  // namespace
}  // namespace bpfprof
