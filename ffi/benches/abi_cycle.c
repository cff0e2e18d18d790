/* One blocking acquire + release per cycle through the C ABI; prints the
 * mean nanoseconds per cycle. Driven by benches/abi_cycle.rs:
 *   abi_cycle URL RESOURCE CYCLES */
#define _POSIX_C_SOURCE 200809L
#include <fencelock.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  const char *urls[] = {argv[1]};
  long cycles = atol(argv[3]);
  fencelock_client *client = NULL;
  if (fencelock_client_new(urls, 1, NULL, &client, NULL) != FENCELOCK_STATUS_OK) return 3;
  double start = 0;
  for (long i = -cycles / 10; i < cycles; i++) { /* the first tenth warms up */
    if (i == 0) start = now_ns();
    fencelock_lock *lock = NULL;
    if (fencelock_acquire(client, argv[2], 10000, 0, &lock, NULL) != FENCELOCK_STATUS_OK) return 4;
    if (fencelock_lock_release(lock, NULL) != FENCELOCK_STATUS_OK) return 5;
    fencelock_lock_free(lock);
  }
  printf("%.0f\n", (now_ns() - start) / (double)cycles);
  fencelock_client_free(client);
  return 0;
}
