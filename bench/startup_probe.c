/* Start-up probe for bench/startup.py: prints CLOCK_MONOTONIC at its first instruction of
 * interest (main) and just before it exits, and keeps a CPU busy in between. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char** argv) {
  uint64_t start = now_ns();
  uint64_t run_ns = (uint64_t)(argc > 1 ? atoi(argv[1]) : 300) * 1000000u;
  volatile uint64_t x = 0;
  while (now_ns() - start < run_ns) x += 1;
  printf("main_ns=%llu\n", (unsigned long long)start);
  uint64_t end = now_ns();
  printf("exit_ns=%llu\n", (unsigned long long)end);
  fflush(stdout);
  return 0;
}
