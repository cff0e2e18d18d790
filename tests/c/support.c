/*
 * The helpers and completion callbacks declared in support.h.
 */
#define _GNU_SOURCE
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A resource name no other test (or earlier run) uses. */
const char *unique(const char *name) {
  static char buffer[8][128];
  static int next;
  char *out = buffer[next++ % 8];
  snprintf(out, 128, "c-%s-%d-%ld", name, (int)getpid(), (long)time(NULL));
  return out;
}

/* A client with the generous node timeout; `auto_renew` false lets every lock expire at its ttl. */
fencelock_client *connect_with_renewal(redis_nodes *nodes, bool auto_renew) {
  fencelock_client *client = NULL;
  fencelock_error *error = NULL;
  fencelock_options *options = NULL;
  if (fencelock_options_new(&options) != FENCELOCK_STATUS_OK ||
      fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS) != FENCELOCK_STATUS_OK ||
      fencelock_options_set_auto_renew(options, auto_renew) != FENCELOCK_STATUS_OK) {
    fencelock_options_free(options);
    return NULL;
  }
  fencelock_status status = fencelock_client_new(nodes->url_list, (size_t)nodes->count, options, &client, &error);
  fencelock_options_free(options);
  if (status != FENCELOCK_STATUS_OK) {
    fprintf(stderr, "    connect failed: %s\n", fencelock_error_message(error));
    fencelock_error_free(error);
    return NULL;
  }
  return client;
}

fencelock_client *connect_to(redis_nodes *nodes) { return connect_with_renewal(nodes, true); }

/* Runs a Redis command on node `index` through the harness; returns the reply. */
const char *redis(redis_nodes *nodes, int index, const char *command) {
  static char reply[4096];
  if (redis_nodes_run(nodes, reply, sizeof reply, "call %d %s", index, command) != 0) {
    fprintf(stderr, "    harness: %s\n", reply);
  }
  return reply;
}

const char *on_lock_key(redis_nodes *nodes, const char *verb, const char *resource) {
  char command[256];
  snprintf(command, sizeof command, "%s fencelock:{%s}", verb, resource);
  return redis(nodes, 0, command);
}

/* Waits up to `ms` for `*counter` to reach `target`. */
int wait_for(atomic_int *counter, int target, long ms) {
  for (long waited = 0; atomic_load(counter) < target && waited < ms; waited += 10) sleep_ms(10);
  return atomic_load(counter) >= target;
}

/* The lock on `resource`, or NULL (the caller's CHECK fails the test). */
fencelock_lock *take(fencelock_client *client, const char *resource, uint64_t ttl_ms) {
  fencelock_lock *lock = NULL;
  return fencelock_acquire(client, resource, ttl_ms, 0, &lock, NULL) == FENCELOCK_STATUS_OK ? lock : NULL;
}

/* Copies the error's message into the record, then frees the error. */
static void keep_message(async_record *record, fencelock_error *error) {
  const char *message = error != NULL ? fencelock_error_message(error) : NULL;
  snprintf(record->message, sizeof record->message, "%s", message != NULL ? message : "");
  fencelock_error_free(error);
}

void on_acquired(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  async_record *record = user_data;
  record->status = status;
  record->lock = lock;
  keep_message(record, error);
  if (record->client != NULL) {
    fencelock_lock *other = NULL;
    record->nested_blocking = fencelock_try_acquire(record->client, record->resource, 1000, &other, NULL);
    if (other != NULL) {
      record->nested_release = fencelock_lock_release(other, NULL);
      fencelock_lock_free(other);
    }
    fencelock_event event;
    record->nested_next_event = fencelock_client_next_event(record->client, 10, &event);
  }
  atomic_fetch_add(&record->calls, 1);
}

void on_done(void *user_data, fencelock_status status, fencelock_error *error) {
  async_record *record = user_data;
  record->status = status;
  keep_message(record, error);
  atomic_fetch_add(&record->calls, 1);
}
