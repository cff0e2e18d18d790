/* Interop worker (C ABI): ITERATIONS times, take the lock, do a non-atomic
 * read-modify-write of the counter file, log the critical section.
 * FENCELOCK_INTEROP_TAKE (see worker.py) says what it takes instead: `elect`
 * campaigns (announcing "c", also FENCELOCK_INTEROP_ELECT=1; the leadership
 * is a lock whose fencing token is the epoch), `permits:K` a permit (logged
 * as a fifth field, the counter untouched), `rw` reads (even iterations, `r`)
 * and writes (odd, `w`). FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not
 * empty), is the per-node timeout in milliseconds (anything else fails the
 * worker).
 *   worker NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated) */
#define _POSIX_C_SOURCE 200809L
#include <fencelock.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static unsigned long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec;
}

static int fail(const char *what, fencelock_error *error) {
  fprintf(stderr, "c worker: %s: %s\n", what, error ? fencelock_error_message(error) : "failed");
  fencelock_error_free(error);
  return 1;
}

int main(int argc, char **argv) {
  if (argc != 6) return 2;
  char *list = strdup(argv[1]);
  const char *urls[16];
  size_t count = 0;
  for (char *url = strtok(list, ","); url != NULL && count < 16; url = strtok(NULL, ",")) urls[count++] = url;
  fencelock_client *client = NULL;
  fencelock_error *error = NULL;
  fencelock_options *options = NULL;
  const char *timeout_ms = getenv("FENCELOCK_INTEROP_NODE_TIMEOUT_MS");
  if (timeout_ms != NULL && *timeout_ms != '\0') {
    char *end = NULL;
    errno = 0;
    unsigned long long ms = strtoull(timeout_ms, &end, 10);
    /* strtoull also takes spaces and a sign, and saturates on overflow. */
    if (!isdigit((unsigned char)*timeout_ms) || *end != '\0' || errno == ERANGE) {
      fprintf(stderr, "c worker: FENCELOCK_INTEROP_NODE_TIMEOUT_MS is not a number of milliseconds: '%s'\n",
              timeout_ms);
      return 1;
    }
    if (fencelock_options_new(&options) != FENCELOCK_STATUS_OK ||
        fencelock_options_set_node_timeout_ms(options, ms) != FENCELOCK_STATUS_OK)
      return fail("options", NULL);
  }
  fencelock_status connected = fencelock_client_new(urls, count, options, &client, &error);
  fencelock_options_free(options);
  if (connected != FENCELOCK_STATUS_OK) return fail("connect", error);
  free(list);
  const char *elect = getenv("FENCELOCK_INTEROP_ELECT");
  const char *mode = getenv("FENCELOCK_INTEROP_TAKE");
  if (elect != NULL && strcmp(elect, "1") == 0) mode = "elect";
  if (mode == NULL) mode = "lock";
  for (int i = 0; i < atoi(argv[3]); i++) {
    fencelock_lock *lock = NULL;
    fencelock_status taken;
    int writes = 1;
    char extra[16] = "";
    if (strcmp(mode, "elect") == 0) {
      taken = fencelock_campaign(client, argv[2], 10000, 120000, (const uint8_t *)"c", 1, &lock, &error);
    } else if (strncmp(mode, "permits:", 8) == 0) {
      taken = fencelock_semaphore_acquire(client, argv[2], (uint32_t)atoi(mode + 8), 10000, 120000, &lock, &error);
      writes = 0;
    } else if (strcmp(mode, "rw") == 0) {
      writes = i % 2;
      taken = writes ? fencelock_rw_write(client, argv[2], 10000, 120000, &lock, &error)
                     : fencelock_rw_read(client, argv[2], 10000, 120000, &lock, &error);
      strcpy(extra, writes ? " w" : " r");
    } else {
      taken = fencelock_acquire(client, argv[2], 10000, 120000, &lock, &error);
    }
    if (taken != FENCELOCK_STATUS_OK) return fail("acquire", error);
    uint32_t permit = 0;
    if (fencelock_lock_permit(lock, &permit)) snprintf(extra, sizeof extra, " %u", (unsigned)permit);
    uint64_t token = 0;
    fencelock_lock_fencing_token(lock, &token);
    unsigned long long start = now_ns();
    long value = 0;
    FILE *counter = fopen(argv[4], "r");
    if (counter != NULL) {
      if (fscanf(counter, "%ld", &value) != 1) value = 0;
      fclose(counter);
    }
    struct timespec pause = {0, 3000000};
    nanosleep(&pause, NULL); /* widen the window a lost update needs */
    if (writes) {
      counter = fopen(argv[4], "w");
      if (counter == NULL) return 1;
      fprintf(counter, "%ld\n", value + 1);
      fclose(counter);
    }
    char line[160];
    snprintf(line, sizeof line, "c %llu %llu %llu%s\n", (unsigned long long)token, start, now_ns(), extra);
    FILE *log = fopen(argv[5], "a");
    if (log == NULL) return 1;
    fputs(line, log);
    fclose(log);
    if (fencelock_lock_release(lock, &error) != FENCELOCK_STATUS_OK) return fail("release", error);
    fencelock_lock_free(lock);
  }
  fencelock_client_free(client);
  return 0;
}
