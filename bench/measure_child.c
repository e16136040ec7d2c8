/* measure_child CMD [ARGS...]: runs CMD and prints `wall_ms=W cpu_ms=C` for its whole life
 * (C: user + system time of CMD and of the descendants it waited for), after CMD's own output.
 * For workloads that do not time themselves, such as a JVM or node with their start-up and JIT
 * warm-up (bench/runtime_overhead.sh). Exits with CMD's status. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double timeval_ms(struct timeval tv) { return tv.tv_sec * 1e3 + tv.tv_usec / 1e3; }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: measure_child CMD [ARGS...]\n");
    return 2;
  }
  const double start = now_ms();
  const pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "measure_child: fork: %s\n", strerror(errno));
    return 2;
  }
  if (pid == 0) {
    execvp(argv[1], argv + 1);
    fprintf(stderr, "measure_child: %s: %s\n", argv[1], strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage usage;
  while (wait4(pid, &status, 0, &usage) < 0) {
    if (errno != EINTR) {
      fprintf(stderr, "measure_child: wait4: %s\n", strerror(errno));
      return 2;
    }
  }
  const double wall = now_ms() - start;
  fflush(stdout);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "measure_child: %s did not exit cleanly (status 0x%x)\n", argv[1], status);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
  printf("wall_ms=%.1f cpu_ms=%.1f\n", wall,
         timeval_ms(usage.ru_utime) + timeval_ms(usage.ru_stime));
  return 0;
}
