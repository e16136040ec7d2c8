/* bench/syscall_cost.sh's workload: N getppid system calls (the cheapest there is, so that
 * what a profiler adds to every system call's entry and exit shows), timed by the program
 * itself; prints "NS ns per system call". */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  const long calls = argc > 1 ? atol(argv[1]) : 3000000;
  if (calls <= 0) {
    fprintf(stderr, "usage: syscall_loop [CALLS > 0]\n");
    return 2;
  }
  struct timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (long i = 0; i < calls; i++) syscall(SYS_getppid);
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
  printf("%.1f ns per system call\n", ns / calls);
  return 0;
}
