/* bench/memory_overhead.sh's workload: what an allocation-heavy program does for a fixed time
 * (default 3000 ms): malloc and free in a loop (sizes 16 B to 4 KiB, a few live at once), and
 * every so often another function grows the heap by 8 MiB, touched page by page, to 600 MiB
 * by the end, freed at the end. Prints the loop's iterations and the MiB grown:
 *   work iterations=N grown_mib=M */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (8u << 20)
#define BLOCKS 75 /* 600 MiB */
#define LIVE 64

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static char* blocks[BLOCKS];

__attribute__((noinline)) static void grow_block(int i) {
  blocks[i] = malloc(BLOCK);
  if (!blocks[i]) exit(3);
  for (size_t at = 0; at < BLOCK; at += 4096) blocks[i][at] = (char)at;
}

/* A round of the allocation loop: LIVE slots, each freed and allocated again. */
__attribute__((noinline)) static uint64_t churn(void** live, uint64_t* seed) {
  for (int i = 0; i < LIVE; ++i) {
    *seed = *seed * 6364136223846793005ull + 1442695040888963407ull;
    free(live[i]);
    live[i] = malloc(16 + (size_t)(*seed >> 52));
    if (!live[i]) exit(3);
    ((char*)live[i])[0] = (char)i;
  }
  return LIVE;
}

int main(int argc, char** argv) {
  const uint64_t run_ns = (uint64_t)(argc > 1 ? atoi(argv[1]) : 3000) * 1000000ull;
  void* live[LIVE] = {0};
  uint64_t seed = 1, iterations = 0;
  int grown = 0;
  const uint64_t start = now_ns();
  for (uint64_t t = now_ns(); t - start < run_ns; t = now_ns()) {
    for (int k = 0; k < 64; ++k) iterations += churn(live, &seed);
    /* The blocks spread over the run's first 90%. */
    if (grown < BLOCKS && (t - start) * 10 * BLOCKS >= (uint64_t)grown * 9 * run_ns)
      grow_block(grown++);
  }
  for (int i = 0; i < grown; ++i) free(blocks[i]);
  for (int i = 0; i < LIVE; ++i) free(live[i]);
  printf("work iterations=%llu grown_mib=%d\n", (unsigned long long)iterations, grown * 8);
  return 0;
}
