/*
 * C tests of libfencelock against real redis-server nodes (started by the
 * shared harness). Prints one line per test and "N passed, N failed".
 *
 *   test_fencelock              run every test
 *   test_fencelock hold URL RESOURCE MS
 *                               helper process: take the lock, print its
 *                               token, hold it MS milliseconds, release
 *   test_fencelock race-operation-out URL
 *                               helper process: start operations whose
 *                               callback frees the struct holding their handle
 */
#define _GNU_SOURCE
#include <fencelock.h>

#include <limits.h>
#include <math.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static redis_nodes single;
static redis_nodes trio;
static const char *self_path;
static int test_failed;

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      test_failed = 1;                                                         \
      return;                                                                  \
    }                                                                          \
  } while (0)

#define CHECK_STATUS(expr, expected)                                           \
  do {                                                                         \
    fencelock_status got_ = (expr);                                            \
    if (got_ != (expected)) {                                                  \
      fprintf(stderr, "    %s:%d: %s returned %s, expected %s\n", __FILE__,    \
              __LINE__, #expr, fencelock_status_name(got_),                    \
              fencelock_status_name(expected));                                \
      test_failed = 1;                                                         \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* ---- helpers ------------------------------------------------------------ */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* A resource name no other test (or earlier run) uses. */
static const char *unique(const char *name) {
  static char buffer[8][128];
  static int next;
  char *out = buffer[next++ % 8];
  snprintf(out, 128, "c-%s-%d-%ld", name, (int)getpid(), (long)time(NULL));
  return out;
}

/*
 * None of these tests is about node timeouts, and they also run under
 * valgrind on a busy machine: a generous per-node timeout keeps a slow
 * answer from turning "held by another" into "timed out" or "unavailable".
 */
#define GENEROUS_NODE_TIMEOUT_MS 5000

/* A client with the generous node timeout; `auto_renew` false lets every lock expire at its ttl. */
static fencelock_client *connect_with_renewal(redis_nodes *nodes, bool auto_renew) {
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

static fencelock_client *connect_to(redis_nodes *nodes) { return connect_with_renewal(nodes, true); }

/* Runs a Redis command on node `index` through the harness; returns the reply. */
static const char *redis(redis_nodes *nodes, int index, const char *command) {
  static char reply[4096];
  if (redis_nodes_run(nodes, reply, sizeof reply, "call %d %s", index, command) != 0) {
    fprintf(stderr, "    harness: %s\n", reply);
  }
  return reply;
}

/* Waits up to `ms` for `*counter` to reach `target`. */
static int wait_for(atomic_int *counter, int target, long ms) {
  for (long waited = 0; atomic_load(counter) < target && waited < ms; waited += 10) sleep_ms(10);
  return atomic_load(counter) >= target;
}

/* ---- tests -------------------------------------------------------------- */

static void test_version_matches_header(void) {
  CHECK(strcmp(fencelock_version(), FENCELOCK_VERSION) == 0);
}

static void test_status_names(void) {
  CHECK(strcmp(fencelock_status_name(FENCELOCK_STATUS_NOT_ACQUIRED), "FENCELOCK_STATUS_NOT_ACQUIRED") == 0);
  CHECK(strcmp(fencelock_status_name(FENCELOCK_STATUS_OK), "FENCELOCK_STATUS_OK") == 0);
  CHECK(strcmp(fencelock_status_name(12345), "FENCELOCK_STATUS_UNKNOWN") == 0);
  CHECK(strcmp(fencelock_status_name(-1), "FENCELOCK_STATUS_UNKNOWN") == 0);
}

static void test_client_lifecycle_with_options(void) {
  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "ctest:"), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 200), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_connect_timeout_ms(options, 2000), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_drift_factor(options, 0.02), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_retry_ms(options, 5, 50), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_auto_renew(options, true), FENCELOCK_STATUS_OK);
  fencelock_client *client = NULL;
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
  fencelock_options_free(options);
  CHECK(client != NULL);

  const char *resource = unique("prefix");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "EXISTS ctest:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);

  /* free(NULL) is a no-op for every type. */
  fencelock_client_free(NULL);
  fencelock_lock_free(NULL);
  fencelock_options_free(NULL);
  fencelock_error_free(NULL);
  fencelock_operation_free(NULL);
  fencelock_string_free(NULL);
  fencelock_event_clear(NULL);
}

static void test_acquire_extend_release(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("basic");
  fencelock_lock *lock = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, &error), FENCELOCK_STATUS_OK);
  CHECK(error == NULL); /* written only on failure */
  CHECK(strcmp(fencelock_lock_resource(lock), resource) == 0);

  uint64_t token = 0, remaining = 0, extended = 0;
  bool held = false;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(token > 0);
  CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  CHECK_STATUS(fencelock_lock_remaining_ms(lock, &remaining), FENCELOCK_STATUS_OK);
  CHECK(remaining > 0 && remaining <= 1000);

  CHECK_STATUS(fencelock_lock_extend(lock, 5000, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_remaining_ms(lock, &extended), FENCELOCK_STATUS_OK);
  CHECK(extended > remaining && extended <= 5000);

  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  char command[256];
  snprintf(command, sizeof command, "EXISTS fencelock:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "0") == 0);

  /* Double release and extend after release: documented statuses, with detail. */
  CHECK_STATUS(fencelock_lock_release(lock, &error), FENCELOCK_STATUS_NOT_HELD);
  CHECK(error != NULL && fencelock_error_status(error) == FENCELOCK_STATUS_NOT_HELD);
  CHECK(strstr(fencelock_error_message(error), resource) != NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_lock_extend(lock, 1000, NULL), FENCELOCK_STATUS_NOT_HELD);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_contention_in_one_process(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("busy");
  fencelock_lock *held = NULL, *other = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 2000, 0, &held, NULL), FENCELOCK_STATUS_OK);

  CHECK_STATUS(fencelock_try_acquire(client, resource, 1000, &other, &error), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(other == (fencelock_lock *)0x1); /* out-parameter untouched on failure */
  CHECK(strstr(fencelock_error_message(error), resource) != NULL);
  fencelock_error_free(error);
  error = NULL;

  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 150, &other, &error), FENCELOCK_STATUS_TIMEOUT);
  CHECK(fencelock_error_node_count(error) == 1);
  fencelock_node_outcome outcome = FENCELOCK_NODE_OK;
  const char *node = NULL, *detail = NULL;
  CHECK_STATUS(fencelock_error_node(error, 0, &node, &outcome, &detail), FENCELOCK_STATUS_OK);
  CHECK(outcome == FENCELOCK_NODE_HELD_BY_OTHER);
  CHECK(strstr(node, "127.0.0.1") != NULL && detail != NULL);
  CHECK_STATUS(fencelock_error_node(error, 1, &node, NULL, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  fencelock_error_free(error);

  CHECK_STATUS(fencelock_lock_release(held, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(held);
  fencelock_client_free(client);
}

static void test_contention_across_processes(void) {
  const char *resource = unique("procs");
  char command[1024];
  snprintf(command, sizeof command, "'%s' hold '%s' '%s' 700", self_path, single.urls[0], resource);
  FILE *child = popen(command, "r");
  CHECK(child != NULL);
  unsigned long long child_token = 0;
  CHECK(fscanf(child, "token %llu", &child_token) == 1);

  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_try_acquire(client, resource, 1000, &lock, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  /* The child releases after 700 ms; waiting up to 10 s must get the lock. */
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 10000, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(token > child_token);
  CHECK(pclose(child) == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_fencing_tokens_and_fenced_writes(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("fence");
  uint64_t tokens[5] = {0};
  for (int i = 0; i < 5; i++) {
    fencelock_lock *lock = NULL;
    CHECK_STATUS(fencelock_acquire(client, resource, 1000, 1000, &lock, NULL), FENCELOCK_STATUS_OK);
    CHECK_STATUS(fencelock_lock_fencing_token(lock, &tokens[i]), FENCELOCK_STATUS_OK);
    CHECK(i == 0 || tokens[i] > tokens[i - 1]);
    CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
    fencelock_lock_free(lock);
  }
  const char *key = unique("fenced-key");
  CHECK_STATUS(fencelock_fenced_set(client, key, "newest", tokens[4], NULL), FENCELOCK_STATUS_OK);
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_fenced_set(client, key, "stale", tokens[0], &error), FENCELOCK_STATUS_STALE_TOKEN);
  CHECK(fencelock_error_message(error) != NULL);
  fencelock_error_free(error);

  char *value = NULL;
  uint64_t stored = 0;
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "newest") == 0);
  CHECK(stored == tokens[4]);
  fencelock_string_free(value);

  /* A fence (token + holder id): the same grant may write again with its
     token; a bare equal token, or another grant's, may not. */
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 1000, &lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_fence fence = {0, 0};
  CHECK_STATUS(fencelock_lock_fence(lock, &fence), FENCELOCK_STATUS_OK);
  CHECK(fence.token > tokens[4] && fence.holder >= 1 && fence.holder <= FENCELOCK_MAX_HOLDER_ID);
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "mine", fence, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "mine again", fence, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_fenced_set(client, key, "bare", fence.token, NULL), FENCELOCK_STATUS_STALE_TOKEN);
  fencelock_fence other = {fence.token, fence.holder % FENCELOCK_MAX_HOLDER_ID + 1};
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "other", other, NULL), FENCELOCK_STATUS_STALE_TOKEN);
  fencelock_fence too_big = {fence.token + 1, (uint64_t)FENCELOCK_MAX_HOLDER_ID + 1};
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "x", too_big, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_fence(lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "mine again") == 0);
  fencelock_string_free(value);
  CHECK_STATUS(fencelock_fenced_get(client, unique("absent"), &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value == NULL && stored == 0);
  fencelock_client_free(client);
}

static void test_loss_event_pulled(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_event event;
  memset(&event, 0, sizeof event);
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);

  const char *resource = unique("lost");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 300, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);

  /* The next renewal (every ttl/3) finds the key gone. */
  CHECK_STATUS(fencelock_client_next_event(client, 10000, &event), FENCELOCK_STATUS_OK);
  CHECK(event.kind == FENCELOCK_EVENT_LOCK_LOST);
  CHECK(event.reason == FENCELOCK_LOSS_DELETED);
  CHECK(event.fencing_token == token);
  CHECK(strcmp(event.resource, resource) == 0);
  fencelock_event_clear(&event);
  CHECK(event.resource == NULL);
  fencelock_event_clear(&event); /* twice is safe */

  bool held = true;
  CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  CHECK_STATUS(fencelock_lock_extend(lock, 1000, NULL), FENCELOCK_STATUS_LOST);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_NOT_HELD);
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

typedef struct loss_record {
  atomic_int calls;
  uint64_t token;
  fencelock_loss_reason reason;
  char resource[128];
} loss_record;

static void on_event(void *user_data, const fencelock_event *event) {
  loss_record *record = user_data;
  record->token = event->fencing_token;
  record->reason = event->reason;
  snprintf(record->resource, sizeof record->resource, "%s", event->resource);
  atomic_fetch_add(&record->calls, 1);
}

static void test_loss_event_callback(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static loss_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event, &record), FENCELOCK_STATUS_OK);
  const char *resource = unique("lost-cb");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 300, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  redis(&single, 0, command);
  CHECK(wait_for(&record.calls, 1, 10000));
  sleep_ms(400); /* a second call would show up within a few renewal periods */
  CHECK(atomic_load(&record.calls) == 1);
  CHECK(record.token == token && record.reason == FENCELOCK_LOSS_DELETED);
  CHECK(strcmp(record.resource, resource) == 0);
  /* Delivered to the callback, so nothing was queued. */
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);
  CHECK_STATUS(fencelock_client_set_event_callback(client, NULL, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

typedef struct lost_record {
  atomic_int calls;
  atomic_int finished;
  fencelock_loss_reason reason;
  int sleep_ms;
  fencelock_lock *free_me; /* freed by the callback itself when set */
} lost_record;

static void on_lock_lost(void *user_data, fencelock_loss_reason reason) {
  lost_record *record = user_data;
  record->reason = reason;
  atomic_fetch_add(&record->calls, 1);
  if (record->sleep_ms > 0) sleep_ms(record->sleep_ms);
  if (record->free_me != NULL) fencelock_lock_free(record->free_me); /* returns at once here */
  atomic_store(&record->finished, 1);
}

/* The lock on `resource`, or NULL (the caller's CHECK fails the test). */
static fencelock_lock *take(fencelock_client *client, const char *resource, uint64_t ttl_ms) {
  fencelock_lock *lock = NULL;
  return fencelock_acquire(client, resource, ttl_ms, 0, &lock, NULL) == FENCELOCK_STATUS_OK ? lock : NULL;
}

static void delete_key(const char *resource) {
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
}

static void test_lock_lost_callback(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static lost_record record, late, released;
  memset(&record, 0, sizeof record);
  memset(&late, 0, sizeof late);
  memset(&released, 0, sizeof released);
  const char *resource = unique("lock-lost-cb");
  fencelock_lock *lock = take(client, resource, 300);
  CHECK(lock != NULL);
  CHECK_STATUS(fencelock_lock_on_lost(NULL, on_lock_lost, &record, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_on_lost(lock, on_lock_lost, &record, NULL), FENCELOCK_STATUS_OK);
  delete_key(resource);
  CHECK(wait_for(&record.calls, 1, 10000));
  sleep_ms(400); /* a second call would show up within a few renewal periods */
  CHECK(atomic_load(&record.calls) == 1 && record.reason == FENCELOCK_LOSS_DELETED);
  /* Delivered to the lock's own callback, so not queued for the client (nobody may poll it). */
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);
  /* Set on a lock already lost: called at once. */
  CHECK_STATUS(fencelock_lock_on_lost(lock, on_lock_lost, &late, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&late.calls, 1, 10000) && late.reason == FENCELOCK_LOSS_DELETED);
  fencelock_lock_free(lock);
  /* Never called after a release. */
  lock = take(client, unique("lock-lost-cb-released"), 300);
  CHECK(lock != NULL);
  CHECK_STATUS(fencelock_lock_on_lost(lock, on_lock_lost, &released, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  sleep_ms(400);
  CHECK(atomic_load(&released.calls) == 0);
  CHECK_STATUS(fencelock_lock_on_lost(lock, NULL, NULL, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_lock_free_waits_for_its_lost_callback(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static lost_record slow, self;
  memset(&slow, 0, sizeof slow);
  memset(&self, 0, sizeof self);
  slow.sleep_ms = 200;
  const char *resource = unique("lock-lost-slow");
  fencelock_lock *lock = take(client, resource, 300);
  CHECK(lock != NULL);
  CHECK_STATUS(fencelock_lock_on_lost(lock, on_lock_lost, &slow, NULL), FENCELOCK_STATUS_OK);
  delete_key(resource);
  CHECK(wait_for(&slow.calls, 1, 10000));
  fencelock_lock_free(lock); /* waits for the callback in progress */
  CHECK(atomic_load(&slow.finished) == 1);
  /* A callback may free its own lock. */
  resource = unique("lock-lost-self");
  self.free_me = take(client, resource, 300);
  CHECK(self.free_me != NULL);
  CHECK_STATUS(fencelock_lock_on_lost(self.free_me, on_lock_lost, &self, NULL), FENCELOCK_STATUS_OK);
  delete_key(resource);
  CHECK(wait_for(&self.finished, 1, 10000));
  fencelock_client_free(client);
}

typedef struct async_record {
  atomic_int calls;
  fencelock_status status;
  fencelock_lock *lock;
  fencelock_status nested_blocking; /* what a blocking call made from the callback returned */
  fencelock_status nested_release;
  fencelock_status nested_next_event;
  fencelock_client *client;
  char resource[128];
} async_record;

static void on_acquired(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  async_record *record = user_data;
  record->status = status;
  record->lock = lock;
  fencelock_error_free(error);
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

static void on_done(void *user_data, fencelock_status status, fencelock_error *error) {
  async_record *record = user_data;
  record->status = status;
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

static void on_done_never(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  (void)user_data;
  (void)status;
  (void)lock;
  (void)error;
  fprintf(stderr, "    callback called for a call that failed at once\n");
  abort();
}

static void test_async_acquire_and_release(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static async_record record;
  memset(&record, 0, sizeof record);
  fencelock_operation *operation = NULL;
  const char *resource = unique("async");
  CHECK_STATUS(fencelock_acquire_async(client, resource, 1000, 1000, on_acquired, &record, &operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.lock != NULL);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK); /* after the fact: no effect */
  sleep_ms(50);
  CHECK(atomic_load(&record.calls) == 1);
  fencelock_operation_free(operation);

  fencelock_lock *lock = record.lock;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_lock_extend_async(lock, 8000, on_done, &record, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK);
  uint64_t remaining = 0;
  CHECK_STATUS(fencelock_lock_remaining_ms(lock, &remaining), FENCELOCK_STATUS_OK);
  CHECK(remaining > 1000 && remaining <= 8000);
  char pttl[256];
  snprintf(pttl, sizeof pttl, "PTTL fencelock:{%s}", resource);
  CHECK(atol(redis(&single, 0, pttl)) > 1000);

  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_lock_release_async(lock, on_done, &record, NULL, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock); /* allowed right away: the release keeps what it needs */
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "EXISTS fencelock:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "0") == 0);
  fencelock_client_free(client);
}

static void test_async_fenced_set(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static async_record record;
  memset(&record, 0, sizeof record);
  const char *resource = unique("async-fenced");
  fencelock_lock *lock = take(client, resource, 5000);
  CHECK(lock != NULL);
  fencelock_fence fence;
  CHECK_STATUS(fencelock_lock_fence(lock, &fence), FENCELOCK_STATUS_OK);
  static char key[160];
  snprintf(key, sizeof key, "%s:data", resource);
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_fenced_set_async(client, key, "v1", fence, on_done, &record, &operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000) && record.status == FENCELOCK_STATUS_OK);
  fencelock_operation_free(operation);
  char *value = NULL;
  uint64_t token = 0;
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &token, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "v1") == 0 && token == fence.token);
  fencelock_string_free(value);
  /* An older token is refused through the callback. */
  memset(&record, 0, sizeof record);
  fencelock_fence older = {fence.token - 1, 0};
  CHECK_STATUS(fencelock_fenced_set_async(client, key, "v0", older, on_done, &record, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000) && record.status == FENCELOCK_STATUS_STALE_TOKEN);
  /* Bad arguments fail at once, and the callback is never called. */
  fencelock_fence too_big = {fence.token, (uint64_t)FENCELOCK_MAX_HOLDER_ID + 1};
  CHECK_STATUS(fencelock_fenced_set_async(client, key, "v", too_big, on_done, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set_async(client, key, "v", fence, NULL, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set_async(client, NULL, "v", fence, on_done, &record, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  sleep_ms(50);
  CHECK(atomic_load(&record.calls) == 1);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_async_cancel_fires_once_and_leaves_nothing(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("cancel");
  fencelock_lock *holder = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 5000, 0, &holder, NULL), FENCELOCK_STATUS_OK);

  static async_record record;
  memset(&record, 0, sizeof record);
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_acquire_async(client, resource, 1000, 30000, on_acquired, &record, &operation, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(100);
  CHECK(atomic_load(&record.calls) == 0);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  sleep_ms(100);
  CHECK(atomic_load(&record.calls) == 1);
  CHECK(record.status == FENCELOCK_STATUS_CANCELLED && record.lock == NULL);
  fencelock_operation_free(operation);

  /* The holder is untouched; after its release the lock is free at once. */
  CHECK_STATUS(fencelock_lock_release(holder, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(holder);
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_try_acquire(client, resource, 1000, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

/* Callbacks run on fencelock's callback thread, not its I/O thread: blocking calls work there. */
static void test_blocking_calls_from_a_callback_work(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static async_record record;
  memset(&record, 0, sizeof record);
  record.client = client;
  snprintf(record.resource, sizeof record.resource, "%s", unique("nested"));
  CHECK_STATUS(fencelock_acquire_async(client, unique("outer"), 1000, 0, on_acquired, &record, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK);
  CHECK(record.nested_blocking == FENCELOCK_STATUS_OK);
  CHECK(record.nested_release == FENCELOCK_STATUS_OK);
  CHECK(record.nested_next_event == FENCELOCK_STATUS_TIMEOUT);
  CHECK_STATUS(fencelock_lock_release(record.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(record.lock);
  fencelock_client_free(client);
}

static void test_free_while_renewing_lets_key_expire(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("free-held");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 200, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  sleep_ms(450); /* renewed at least once */
  char command[256];
  snprintf(command, sizeof command, "EXISTS fencelock:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_lock_free(lock);
  int gone = 0;
  for (int i = 0; i < 200 && !gone; i++) {
    gone = strcmp(redis(&single, 0, command), "0") == 0;
    if (!gone) sleep_ms(20);
  }
  CHECK(gone);
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);
  fencelock_client_free(client);
}

static void test_no_event_callback_after_client_free(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static loss_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event, &record), FENCELOCK_STATUS_OK);
  const char *resource = unique("after-free");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 300, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_client_free(client);
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  redis(&single, 0, command);
  bool held = true;
  for (int i = 0; i < 200 && held; i++) { /* the lock still notices the loss */
    sleep_ms(10);
    CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  }
  CHECK(!held);
  sleep_ms(100);
  CHECK(atomic_load(&record.calls) == 0); /* but the freed client's callback is not called */
  fencelock_lock_free(lock);
}

static void test_release_after_client_free(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, unique("orphan"), 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_client_free(client);
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
}

/* ---- callbacks never hold up fencelock's own threads (#15 item 7) ------- */

typedef struct slow_callback {
  long sleep_ms;
  atomic_int started;
  atomic_int finished;
  atomic_int events;
  char last_lost[128];    /* resource of the last lost lock reported */
  fencelock_status status; /* of the acquire, for the completion callback */
  fencelock_lock *lock;
} slow_callback;

static void on_event_sleep(void *user_data, const fencelock_event *event) {
  slow_callback *slow = user_data;
  snprintf(slow->last_lost, sizeof slow->last_lost, "%s", event->resource);
  atomic_fetch_add(&slow->events, 1);
  atomic_store(&slow->started, 1);
  sleep_ms(slow->sleep_ms);
  atomic_store(&slow->finished, 1);
}

static void on_acquired_sleep(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  slow_callback *slow = user_data;
  atomic_store(&slow->started, 1);
  sleep_ms(slow->sleep_ms);
  slow->status = status;
  slow->lock = lock;
  fencelock_error_free(error);
  atomic_store(&slow->finished, 1);
}

/* Looks at `lock` every 5 ms until the slow callback returned: 1 if it was held at every look. */
static int held_while_callback_sleeps(fencelock_lock *lock, slow_callback *slow) {
  while (!atomic_load(&slow->finished)) {
    bool held = false;
    if (fencelock_lock_is_held(lock, &held) != FENCELOCK_STATUS_OK || !held) return 0;
    sleep_ms(5);
  }
  return 1;
}

#define SLOW_TTL_MS 300

static void test_slow_event_callback_does_not_stall_renewals(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static slow_callback slow;
  memset(&slow, 0, sizeof slow);
  slow.sleep_ms = 2 * SLOW_TTL_MS;
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event_sleep, &slow), FENCELOCK_STATUS_OK);
  static char kept_resource[128], lost_resource[128];
  snprintf(kept_resource, sizeof kept_resource, "%s", unique("slow-event-kept"));
  snprintf(lost_resource, sizeof lost_resource, "%s", unique("slow-event-lost"));
  fencelock_lock *kept = NULL, *lost = NULL;
  CHECK_STATUS(fencelock_acquire(client, kept_resource, SLOW_TTL_MS, 0, &kept, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire(client, lost_resource, SLOW_TTL_MS, 0, &lost, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", lost_resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);

  /* The loss of `lost` starts a callback that sleeps two ttls; `kept` is renewed meanwhile. */
  CHECK(wait_for(&slow.started, 1, 10000));
  CHECK(held_while_callback_sleeps(kept, &slow));
  sleep_ms(SLOW_TTL_MS); /* a loss of `kept` would be reported within a ttl */
  CHECK(atomic_load(&slow.events) == 1);
  CHECK(strcmp(slow.last_lost, lost_resource) == 0);
  CHECK_STATUS(fencelock_lock_release(kept, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(kept);
  fencelock_lock_free(lost);
  fencelock_client_free(client);
}

static void test_slow_completion_callback_does_not_stall_renewals(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static slow_callback slow;
  memset(&slow, 0, sizeof slow);
  slow.sleep_ms = 2 * SLOW_TTL_MS;
  fencelock_lock *kept = NULL;
  CHECK_STATUS(fencelock_acquire(client, unique("slow-done-kept"), SLOW_TTL_MS, 0, &kept, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire_async(client, unique("slow-done-other"), 5000, 0, on_acquired_sleep, &slow, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&slow.started, 1, 10000));
  CHECK(held_while_callback_sleeps(kept, &slow));
  CHECK(slow.status == FENCELOCK_STATUS_OK && slow.lock != NULL);
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT); /* nothing was lost */
  CHECK_STATUS(fencelock_lock_release(kept, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(slow.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(kept);
  fencelock_lock_free(slow.lock);
  fencelock_client_free(client);
}

/* ---- stopping a callback waits for a call in progress (#15 item 9) ------ */

/*
 * user_data the test frees as soon as fencelock says no call of the callback
 * can use it any more. The counter sits past the allocator's bookkeeping at
 * the front of a freed block, so a late write in a plain build does not
 * corrupt the heap; ASan and valgrind report it as a use after free.
 */
typedef struct doomed_data {
  char front[64];
  atomic_int calls;
} doomed_data;

static atomic_int stop_returned;      /* the call that stops the callback has returned */
static atomic_int calls_in_progress;  /* calls of on_event_then_touch running now */
static atomic_int calls_after_return; /* calls still running, or started, after the stop returned */

static void on_event_then_touch(void *user_data, const fencelock_event *event) {
  (void)event;
  atomic_fetch_add(&calls_in_progress, 1);
  sleep_ms(5); /* keeps a call in progress while the test stops the callback */
  if (atomic_load(&stop_returned)) atomic_fetch_add(&calls_after_return, 1);
  doomed_data *data = user_data;
  atomic_fetch_add(&data->calls, 1); /* freed memory if this call outlived the stop */
  atomic_fetch_sub(&calls_in_progress, 1);
}

#define DOOMED_LOCKS 4
#define DOOMED_TTL_MS 20
/* Longer than a call of on_event_then_touch: a call that outlived the stop
   (the bug) sees stop_returned before the next round clears it. */
#define CALL_OUTLIVES_STOP_MS 20

/*
 * Takes up to DOOMED_LOCKS locks that expire (auto-renew off) in
 * DOOMED_TTL_MS: a burst of loss events. A lock granted too slowly for so
 * short a ttl (valgrind) is refused and simply adds no event.
 */
static void take_expiring_locks(fencelock_client *client, int round, fencelock_lock **locks) {
  /* The first acquire of a client loads the scripts: not within a 20 ms ttl under valgrind. */
  fencelock_lock *warm = NULL;
  if (fencelock_acquire(client, unique("warm-up"), 5000, 0, &warm, NULL) == FENCELOCK_STATUS_OK) {
    fencelock_lock_release(warm, NULL);
    fencelock_lock_free(warm);
  }
  for (int i = 0; i < DOOMED_LOCKS; i++) {
    char resource[160];
    snprintf(resource, sizeof resource, "%s-%d-%d", unique("expiring"), round, i);
    locks[i] = NULL;
    fencelock_acquire(client, resource, DOOMED_TTL_MS, 0, &locks[i], NULL);
  }
}

static void free_locks(fencelock_lock **locks) {
  for (int i = 0; i < DOOMED_LOCKS; i++) fencelock_lock_free(locks[i]);
}

/* What the rounds of a test saw. */
typedef struct stop_tally {
  int delivered;             /* callback calls that completed before the stop returned */
  int stopped_during_a_call; /* rounds whose stop began while a call was running; that
                                call must have completed when the stop returned */
} stop_tally;

/*
 * One round: a callback with fresh user_data, a burst of losses, then the
 * callback stopped (by clearing it, or by freeing the client) while calls run,
 * and the user_data freed as soon as the stop returns.
 */
static int stop_while_firing(fencelock_client *client, int round, bool free_client, stop_tally *tally) {
  doomed_data *data = calloc(1, sizeof *data);
  if (data == NULL) return -1;
  atomic_store(&stop_returned, 0);
  if (fencelock_client_set_event_callback(client, on_event_then_touch, data) != FENCELOCK_STATUS_OK) {
    free(data);
    return -1;
  }
  fencelock_lock *locks[DOOMED_LOCKS];
  take_expiring_locks(client, round, locks);
  /* Stop as soon as a call has started: it is then (almost always) still running. */
  for (int waited = 0; atomic_load(&calls_in_progress) == 0 && waited < 2000; waited++) sleep_ms(1);
  tally->stopped_during_a_call += atomic_load(&calls_in_progress) > 0;
  if (free_client) {
    fencelock_client_free(client);
  } else if (fencelock_client_set_event_callback(client, NULL, NULL) != FENCELOCK_STATUS_OK) {
    return -1;
  }
  atomic_store(&stop_returned, 1);
  if (atomic_load(&calls_in_progress) != 0) atomic_fetch_add(&calls_after_return, 1);
  tally->delivered += atomic_load(&data->calls);
  free(data);
  free_locks(locks);
  sleep_ms(CALL_OUTLIVES_STOP_MS);
  return 0;
}

static void test_clearing_the_event_callback_waits_for_a_call_in_progress(void) {
  fencelock_client *client = connect_with_renewal(&single, false);
  CHECK(client != NULL);
  atomic_store(&calls_after_return, 0);
  stop_tally tally = {0, 0};
  for (int round = 0; round < 30; round++) {
    CHECK(stop_while_firing(client, round, false, &tally) == 0);
    fencelock_event event; /* losses after the stop are queued for pulling */
    while (fencelock_client_next_event(client, 0, &event) == FENCELOCK_STATUS_OK) fencelock_event_clear(&event);
  }
  CHECK(atomic_load(&calls_after_return) == 0);
  CHECK(tally.stopped_during_a_call > 0 && tally.delivered >= tally.stopped_during_a_call);
  fencelock_client_free(client);
}

static void test_client_free_waits_for_a_call_in_progress(void) {
  atomic_store(&calls_after_return, 0);
  stop_tally tally = {0, 0};
  for (int round = 0; round < 20; round++) {
    fencelock_client *client = connect_with_renewal(&single, false);
    CHECK(client != NULL);
    CHECK(stop_while_firing(client, round, true, &tally) == 0);
  }
  CHECK(atomic_load(&calls_after_return) == 0);
  CHECK(tally.stopped_during_a_call > 0 && tally.delivered >= tally.stopped_during_a_call);
}

typedef struct self_stopping {
  char front[64]; /* as in doomed_data */
  fencelock_client *client;
} self_stopping;

static atomic_int self_stop_calls;
static atomic_int self_stop_client_idle; /* the test thread no longer uses the client */
static fencelock_status self_stop_cleared;

static void on_event_stop_self(void *user_data, const fencelock_event *event) {
  (void)event;
  self_stopping *stopping = user_data;
  /* A client must not be freed while another thread uses it. Losses queue up meanwhile. */
  while (!atomic_load(&self_stop_client_idle)) sleep_ms(1);
  /* Called from the callback being stopped: neither call can wait for it, and neither needs to. */
  self_stop_cleared = fencelock_client_set_event_callback(stopping->client, NULL, NULL);
  fencelock_client_free(stopping->client);
  free(stopping); /* this call was the last one: no other runs or starts after the two calls above */
  atomic_fetch_add(&self_stop_calls, 1);
}

static void test_a_callback_may_stop_itself_and_free_its_client(void) {
  fencelock_client *client = connect_with_renewal(&single, false);
  CHECK(client != NULL);
  self_stopping *stopping = calloc(1, sizeof *stopping);
  CHECK(stopping != NULL);
  stopping->client = client;
  atomic_store(&self_stop_calls, 0);
  atomic_store(&self_stop_client_idle, 0);
  self_stop_cleared = FENCELOCK_STATUS_INTERNAL;
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event_stop_self, stopping), FENCELOCK_STATUS_OK);
  fencelock_lock *locks[DOOMED_LOCKS];
  take_expiring_locks(client, 0, locks);
  atomic_store(&self_stop_client_idle, 1);
  CHECK(wait_for(&self_stop_calls, 1, 10000));
  sleep_ms(100); /* the other losses (queued while the callback waited) must not reach it */
  CHECK(atomic_load(&self_stop_calls) == 1);
  CHECK(self_stop_cleared == FENCELOCK_STATUS_OK);
  free_locks(locks);
}

/*
 * A child forked while a callback runs has no callback thread: freeing the
 * parent's client there must not wait for a call that will never end in it.
 */
static void test_client_free_in_a_forked_child_does_not_wait_for_the_parents_call(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static slow_callback slow;
  memset(&slow, 0, sizeof slow);
  slow.sleep_ms = 1000;
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event_sleep, &slow), FENCELOCK_STATUS_OK);
  const char *resource = unique("fork-lost");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, SLOW_TTL_MS, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  redis(&single, 0, command);
  CHECK(wait_for(&slow.started, 1, 10000));
  int freed_pipe[2];
  CHECK(pipe(freed_pipe) == 0);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    fencelock_client_free(client);
    if (write(freed_pipe[1], "k", 1) != 1) _exit(2);
    /* Leave through exec, so no leak check (ASan's, valgrind's) runs on this
       copy of the parent's memory, much of it owned by threads not here. */
    execl("/bin/true", "true", (char *)NULL);
    _exit(3);
  }
  close(freed_pipe[1]);
  struct pollfd answer = {.fd = freed_pipe[0], .events = POLLIN, .revents = 0};
  char byte = 0;
  int freed = poll(&answer, 1, 5000) == 1 && read(freed_pipe[0], &byte, 1) == 1;
  close(freed_pipe[0]);
  if (!freed) kill(child, SIGKILL); /* still waiting after 5 s: stop it, by its pid */
  waitpid(child, NULL, 0);
  CHECK(freed);
  CHECK_STATUS(fencelock_client_set_event_callback(client, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(atomic_load(&slow.finished));
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

/* ---- *operation_out is written before the operation can end (#15 item 10) */

/* A caller's request: the callback frees it, handle and all. */
typedef struct operation_request {
  char front[64]; /* past the allocator's bookkeeping at the front of a freed block */
  fencelock_operation *operation;
  atomic_int *finished;
  atomic_int *handle_missing;
} operation_request;

static void on_done_free_request(void *user_data, fencelock_status status, fencelock_error *error) {
  (void)status;
  fencelock_error_free(error);
  operation_request *request = user_data;
  if (request->operation == NULL) atomic_fetch_add(request->handle_missing, 1);
  fencelock_operation_free(request->operation);
  atomic_int *finished = request->finished;
  free(request);
  atomic_fetch_add(finished, 1);
}

/*
 * Helper process: pinned to one CPU before libfencelock starts its threads,
 * so waking them often switches to them at once, in the middle of the
 * *_async call that woke them. Each extend of a released lock ends without
 * I/O, and its callback frees the request holding `operation_out`.
 * Exit 0 when every callback found its handle already written.
 */
static int race_operation_out(const char *url) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  if (sched_setaffinity(0, sizeof one, &one) != 0) return 2;
  const char *urls[] = {url};
  fencelock_client *client = NULL;
  fencelock_lock *lock = NULL;
  if (fencelock_client_new(urls, 1, NULL, &client, NULL) != FENCELOCK_STATUS_OK) return 2;
  if (fencelock_acquire(client, unique("operation-out"), 1000, 0, &lock, NULL) != FENCELOCK_STATUS_OK) return 2;
  if (fencelock_lock_release(lock, NULL) != FENCELOCK_STATUS_OK) return 2;
  static atomic_int finished, handle_missing;
  for (int i = 0; i < 2000; i++) {
    operation_request *request = calloc(1, sizeof *request);
    if (request == NULL) return 2;
    request->finished = &finished;
    request->handle_missing = &handle_missing;
    if (fencelock_lock_extend_async(lock, 1000, on_done_free_request, request, &request->operation, NULL) !=
        FENCELOCK_STATUS_OK)
      return 2;
    while (atomic_load(&finished) <= i) sched_yield();
  }
  fencelock_lock_free(lock);
  fencelock_client_free(client);
  if (atomic_load(&handle_missing) > 0) {
    fprintf(stderr, "    %d of 2000 callbacks ran before their operation handle was written\n",
            atomic_load(&handle_missing));
    return 1;
  }
  return 0;
}

static void test_callback_may_free_the_request_holding_its_operation(void) {
  char command[1024];
  snprintf(command, sizeof command, "'%s' race-operation-out '%s'", self_path, single.urls[0]);
  CHECK(system(command) == 0);
}

static void test_redlock_quorum(void) {
  fencelock_client *client = connect_to(&trio);
  CHECK(client != NULL);
  const char *resource = unique("quorum");
  fencelock_lock *lock = NULL;
  CHECK(redis_nodes_run(&trio, NULL, 0, "kill 0") == 0);
  CHECK_STATUS(fencelock_acquire(client, resource, 2000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);

  CHECK(redis_nodes_run(&trio, NULL, 0, "kill 1") == 0);
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 2000, 0, &lock, &error), FENCELOCK_STATUS_UNAVAILABLE);
  CHECK(fencelock_error_node_count(error) == 3);
  int failed = 0;
  for (size_t i = 0; i < 3; i++) {
    fencelock_node_outcome outcome;
    CHECK_STATUS(fencelock_error_node(error, i, NULL, &outcome, NULL), FENCELOCK_STATUS_OK);
    failed += outcome == FENCELOCK_NODE_FAILED || outcome == FENCELOCK_NODE_TIMED_OUT;
  }
  CHECK(failed == 2);
  CHECK(strstr(fencelock_error_message(error), trio.urls[0]) != NULL);
  fencelock_error_free(error);
  CHECK(redis_nodes_run(&trio, NULL, 0, "restart 0") == 0);
  CHECK(redis_nodes_run(&trio, NULL, 0, "restart 1") == 0);
  CHECK_STATUS(fencelock_acquire(client, resource, 2000, 5000, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

/* reliability.md T21: bad input gets a documented status, never a crash. */
static void test_bad_client_arguments(void) {
  fencelock_client *client = (fencelock_client *)0x1;
  fencelock_error *error = NULL;
  const char *null_url[] = {NULL};
  CHECK_STATUS(fencelock_client_new(NULL, 1, NULL, &client, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(null_url, 1, NULL, &client, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(single.url_list, 0, NULL, &client, &error), FENCELOCK_STATUS_CONFIG);
  CHECK(strlen(fencelock_error_message(error)) > 0);
  fencelock_error_free(error);
  error = NULL;
  const char *bad[] = {"not a url"};
  CHECK_STATUS(fencelock_client_new(bad, 1, NULL, &client, &error), FENCELOCK_STATUS_CONFIG);
  CHECK(strstr(fencelock_error_message(error), "not a url") != NULL);
  fencelock_error_free(error);
  const char *http[] = {"http://127.0.0.1:1"};
  CHECK_STATUS(fencelock_client_new(http, 1, NULL, &client, NULL), FENCELOCK_STATUS_CONFIG);
  const char *twice[] = {single.urls[0], single.urls[0]};
  CHECK_STATUS(fencelock_client_new(twice, 2, NULL, &client, NULL), FENCELOCK_STATUS_CONFIG);
  const char *bad_utf8[] = {"redis://127.0.0.1:1/\xff"};
  CHECK_STATUS(fencelock_client_new(bad_utf8, 1, NULL, &client, NULL), FENCELOCK_STATUS_INVALID_UTF8);

  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(NULL, 5), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "\xc3\x28"), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_options_set_tls_ca_pem(options, NULL, 10), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_CONFIG);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 100), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_drift_factor(options, NAN), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_CONFIG);
  fencelock_options_free(options);
  CHECK(client == (fencelock_client *)0x1); /* never written on failure */

  CHECK(fencelock_error_status(NULL) == FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(fencelock_error_message(NULL) == NULL);
  CHECK(fencelock_error_node_count(NULL) == 0);
  CHECK_STATUS(fencelock_error_node(NULL, 0, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
}

static void test_tls_min_version_option(void) {
  CHECK_STATUS(fencelock_options_set_tls_min_version(NULL, FENCELOCK_TLS_VERSION_1_3), FENCELOCK_STATUS_NULL_ARGUMENT);
  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_2), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_3), FENCELOCK_STATUS_OK);
  CHECK(FENCELOCK_TLS_VERSION_1_2 == 12 && FENCELOCK_TLS_VERSION_1_3 == 13); /* stable values */
  const int32_t bad[] = {11, 14, -1, 0, 1, 3, 10, 120, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_STATUS(fencelock_options_set_tls_min_version(options, bad[i]), FENCELOCK_STATUS_INVALID_ARGUMENT);
  }
  CHECK_STATUS(fencelock_options_set_tls_min_version(NULL, 14), FENCELOCK_STATUS_NULL_ARGUMENT);

  /* The 1.3 minimum reached the client, and the refused values above left it
     in place: a TLS 1.3 minimum cannot be applied to a Redis Cluster. */
  const char *cluster[] = {"rediss+cluster://127.0.0.1:1"};
  fencelock_client *client = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_client_new(cluster, 1, options, &client, &error), FENCELOCK_STATUS_CONFIG);
  const char *message = fencelock_error_message(error);
  CHECK(message != NULL && strstr(message, "tls-protocols") != NULL);
  fencelock_error_free(error);
  CHECK(client == NULL);

  /* Back to 1.2 (the default), with a key prefix; a refused value in between
     changes neither. Plain redis:// nodes ignore the TLS minimum. */
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_2), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "ctls:"), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, 11), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
  fencelock_options_free(options);
  const char *resource = unique("tls-min");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "EXISTS ctls:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_bad_lock_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_lock *lock = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(NULL, "r", 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, NULL, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", 1000, 0, NULL, &error), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "out") != NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_acquire(client, "", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  char huge[5000];
  memset(huge, 'a', sizeof huge - 1);
  huge[sizeof huge - 1] = '\0';
  CHECK_STATUS(fencelock_acquire(client, huge, 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "bad\xff\xfe", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_acquire(client, "r", 0, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", UINT64_MAX, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", (uint64_t)INT32_MAX + 1, 0, &lock, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", 1000, UINT64_MAX, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_try_acquire(client, "", 1000, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, "r", 1000, 0, NULL, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  /* The async variants refuse bad arguments at once; the callback is never called. */
  CHECK_STATUS(fencelock_acquire_async(client, "", 1000, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, "r", 0, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, huge, 1000, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release_async(NULL, on_done, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(lock == NULL);

  uint64_t value = 0;
  bool held = false;
  CHECK_STATUS(fencelock_lock_fencing_token(NULL, &value), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_is_held(NULL, &held), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_remaining_ms(NULL, &value), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(NULL, 1000, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release(NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(fencelock_lock_resource(NULL) == NULL);
  CHECK_STATUS(fencelock_operation_cancel(NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_next_event(NULL, 0, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_next_event(client, 0, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_set_event_callback(NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set(client, "", "v", 1, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set(client, "k", NULL, 1, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);

  CHECK_STATUS(fencelock_acquire(client, unique("ttl"), 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_fencing_token(lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(lock, 0, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(lock, UINT64_MAX, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend_async(lock, 0, on_done, NULL, NULL, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void test_inventory_example(void) {
  const char *example = getenv("FENCELOCK_EXAMPLE_INVENTORY");
  CHECK(example != NULL);
  const char *sku = unique("sku");
  char command[1024];
  snprintf(command, sizeof command, "FENCELOCK_NODES='%s,%s,%s' '%s' '%s' 10", trio.urls[0], trio.urls[1],
           trio.urls[2], example, sku);
  FILE *runs[3];
  for (int i = 0; i < 3; i++) {
    runs[i] = popen(command, "r");
    CHECK(runs[i] != NULL);
  }
  int finished = 0;
  for (int i = 0; i < 3; i++) {
    char line[256];
    while (fgets(line, sizeof line, runs[i]) != NULL) {
    }
    finished += pclose(runs[i]) == 0;
  }
  CHECK(finished == 3);
  /* 3 processes x 10 decrements from 100, each under the lock: exactly 70 left. */
  fencelock_client *client = connect_to(&trio);
  CHECK(client != NULL);
  char key[256];
  snprintf(key, sizeof key, "stock:%s", sku);
  char *value = NULL;
  uint64_t token = 0;
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &token, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "70") == 0);
  CHECK(token > 0);
  fencelock_string_free(value);
  fencelock_client_free(client);
}

/* ---- shared protocol vectors (tests/vectors/protocol.json) -------------- */

/* Copies the string value of "field" in one JSON line (the vectors file keeps
 * one object per line and no escapes). Returns 0 when found. */
static int json_string(const char *line, const char *field, char *out, size_t size) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\": \"", field);
  const char *start = strstr(line, pattern);
  if (start == NULL) return -1;
  start += strlen(pattern);
  const char *end = strchr(start, '"');
  if (end == NULL || (size_t)(end - start) >= size) return -1;
  memcpy(out, start, (size_t)(end - start));
  out[end - start] = '\0';
  return 0;
}

/* The number after "field": in one JSON line, or `missing` when absent. */
static double json_number(const char *line, const char *field, double missing) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\": ", field);
  const char *start = strstr(line, pattern);
  return start == NULL ? missing : strtod(start + strlen(pattern), NULL);
}

/* The error kinds and limits of the vectors are this header's and library's. */
static void check_shared_tables(const char *line, int *kinds_checked, int *limits_checked) {
  char c_status[64];
  if (json_string(line, "c_status", c_status, sizeof c_status) == 0) {
    int code = (int)json_number(line, "code", -1);
    CHECK(strcmp(fencelock_status_name(code), c_status) == 0);
    (*kinds_checked)++;
  } else if (strstr(line, "\"limits\"") != NULL) {
    const fencelock_limits *limits = fencelock_get_limits();
    CHECK(limits->min_ttl_ms == FENCELOCK_MIN_TTL_MS && limits->max_ttl_ms == FENCELOCK_MAX_TTL_MS);
    CHECK(limits->max_wait_ms == FENCELOCK_MAX_WAIT_MS && limits->max_resource_bytes == FENCELOCK_MAX_RESOURCE_BYTES);
    CHECK(limits->max_prefix_bytes == FENCELOCK_MAX_PREFIX_BYTES);
    CHECK(limits->max_fencing_token == FENCELOCK_MAX_FENCING_TOKEN && limits->max_holder_id == FENCELOCK_MAX_HOLDER_ID);
    CHECK(limits->max_drift_factor == FENCELOCK_MAX_DRIFT_FACTOR);
    /* Doubles hold these exactly except the holder id (2^63 - 1 rounds to 2^63). */
    CHECK(json_number(line, "min_ttl_ms", 0) == FENCELOCK_MIN_TTL_MS);
    CHECK(json_number(line, "max_ttl_ms", 0) == FENCELOCK_MAX_TTL_MS);
    CHECK(json_number(line, "max_wait_ms", 0) == FENCELOCK_MAX_WAIT_MS);
    CHECK(json_number(line, "max_resource_bytes", 0) == FENCELOCK_MAX_RESOURCE_BYTES);
    CHECK(json_number(line, "max_prefix_bytes", 0) == FENCELOCK_MAX_PREFIX_BYTES);
    CHECK(json_number(line, "max_fencing_token", 0) == FENCELOCK_MAX_FENCING_TOKEN);
    CHECK(json_number(line, "max_holder_id", 0) == (double)FENCELOCK_MAX_HOLDER_ID);
    CHECK(json_number(line, "max_drift_factor", 0) == FENCELOCK_MAX_DRIFT_FACTOR);
    (*limits_checked)++;
  }
}

static void test_protocol_vectors(void) {
  const char *path = getenv("FENCELOCK_VECTORS");
  CHECK(path != NULL);
  FILE *file = fopen(path, "r");
  CHECK(file != NULL);
  char line[2048];
  int keys_checked = 0, invalid_checked = 0, kinds_checked = 0, limits_checked = 0;
  while (fgets(line, sizeof line, file) != NULL) {
    check_shared_tables(line, &kinds_checked, &limits_checked);
    char prefix[64], resource[128], lock_key[256], fence_key[256];
    if (json_string(line, "lock_key", lock_key, sizeof lock_key) == 0) {
      CHECK(json_string(line, "prefix", prefix, sizeof prefix) == 0);
      CHECK(json_string(line, "resource", resource, sizeof resource) == 0);
      CHECK(json_string(line, "fence_key", fence_key, sizeof fence_key) == 0);
      fencelock_options *options = NULL;
      fencelock_client *client = NULL;
      fencelock_lock *lock = NULL;
      CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
      CHECK_STATUS(fencelock_options_set_key_prefix(options, prefix), FENCELOCK_STATUS_OK);
      CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
      fencelock_options_free(options);
      CHECK_STATUS(fencelock_acquire(client, resource, 5000, 2000, &lock, NULL), FENCELOCK_STATUS_OK);
      uint64_t token = 0;
      CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
      char command[512], expected[32];
      snprintf(command, sizeof command, "GET %s", lock_key);
      const char *owner = redis(&single, 0, command);
      CHECK(strlen(owner) == 32 && strspn(owner, "0123456789abcdef") == 32);
      snprintf(command, sizeof command, "GET %s", fence_key);
      snprintf(expected, sizeof expected, "%llu", (unsigned long long)token);
      CHECK(strcmp(redis(&single, 0, command), expected) == 0);
      CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
      fencelock_lock_free(lock);
      fencelock_client_free(client);
      keys_checked++;
    } else if (strstr(line, "\"why\"") != NULL && strstr(line, "\"script\"") == NULL) {
      /* invalid_resources: a literal resource, or one letter repeated. */
      static char invalid[4096];
      char letter[8];
      if (json_string(line, "resource_repeat", letter, sizeof letter) == 0) {
        const char *times = strstr(line, "\"times\": ");
        CHECK(times != NULL);
        size_t n = (size_t)atol(times + strlen("\"times\": "));
        CHECK(n < sizeof invalid);
        memset(invalid, letter[0], n);
        invalid[n] = '\0';
      } else {
        CHECK(json_string(line, "resource", invalid, sizeof invalid) == 0);
      }
      fencelock_client *client = connect_to(&single);
      fencelock_lock *lock = NULL;
      CHECK_STATUS(fencelock_try_acquire(client, invalid, 1000, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
      fencelock_client_free(client);
      invalid_checked++;
    }
  }
  fclose(file);
  CHECK(keys_checked >= 6 && invalid_checked >= 3);
  CHECK(kinds_checked >= 13 && limits_checked == 1);
}

/* ---- runner ------------------------------------------------------------- */

static int hold(const char *url, const char *resource, long ms) {
  fencelock_client *client = NULL;
  fencelock_lock *lock = NULL;
  fencelock_options *options = NULL;
  const char *urls[] = {url};
  if (fencelock_options_new(&options) != FENCELOCK_STATUS_OK) return 2;
  fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS);
  fencelock_status status = fencelock_client_new(urls, 1, options, &client, NULL);
  fencelock_options_free(options);
  if (status != FENCELOCK_STATUS_OK) return 2;
  if (fencelock_acquire(client, resource, 5000, 0, &lock, NULL) != FENCELOCK_STATUS_OK) return 3;
  uint64_t token = 0;
  fencelock_lock_fencing_token(lock, &token);
  printf("token %llu\n", (unsigned long long)token);
  fflush(stdout);
  sleep_ms(ms);
  int released = fencelock_lock_release(lock, NULL) == FENCELOCK_STATUS_OK ? 0 : 4;
  fencelock_lock_free(lock);
  fencelock_client_free(client);
  return released;
}

typedef struct test_case {
  const char *name;
  void (*run)(void);
} test_case;

#define TEST(fn) {#fn, fn}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "hold") == 0) return hold(argv[2], argv[3], atol(argv[4]));
  if (argc == 3 && strcmp(argv[1], "race-operation-out") == 0) return race_operation_out(argv[2]);
  self_path = realpath(argv[0], NULL);
  const test_case tests[] = {
      TEST(test_version_matches_header),
      TEST(test_status_names),
      TEST(test_client_lifecycle_with_options),
      TEST(test_acquire_extend_release),
      TEST(test_contention_in_one_process),
      TEST(test_contention_across_processes),
      TEST(test_fencing_tokens_and_fenced_writes),
      TEST(test_loss_event_pulled),
      TEST(test_loss_event_callback),
      TEST(test_lock_lost_callback),
      TEST(test_async_fenced_set),
      TEST(test_lock_free_waits_for_its_lost_callback),
      TEST(test_async_acquire_and_release),
      TEST(test_async_cancel_fires_once_and_leaves_nothing),
      TEST(test_blocking_calls_from_a_callback_work),
      TEST(test_free_while_renewing_lets_key_expire),
      TEST(test_release_after_client_free),
      TEST(test_no_event_callback_after_client_free),
      TEST(test_slow_event_callback_does_not_stall_renewals),
      TEST(test_slow_completion_callback_does_not_stall_renewals),
      TEST(test_clearing_the_event_callback_waits_for_a_call_in_progress),
      TEST(test_client_free_waits_for_a_call_in_progress),
      TEST(test_a_callback_may_stop_itself_and_free_its_client),
      TEST(test_client_free_in_a_forked_child_does_not_wait_for_the_parents_call),
      TEST(test_callback_may_free_the_request_holding_its_operation),
      TEST(test_bad_client_arguments),
      TEST(test_tls_min_version_option),
      TEST(test_bad_lock_arguments),
      TEST(test_inventory_example),
      TEST(test_protocol_vectors),
      TEST(test_redlock_quorum),
  };
  if (redis_nodes_start(&single, 1) != 0 || redis_nodes_start(&trio, 3) != 0) {
    fprintf(stderr, "could not start redis nodes through the harness\n");
    return 2;
  }
  const char *only = getenv("FENCELOCK_C_TEST");
  int passed = 0, failed = 0;
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (only != NULL && strstr(tests[i].name, only) == NULL) continue;
    test_failed = 0;
    tests[i].run();
    printf("%s %s\n", test_failed ? "FAIL" : "ok  ", tests[i].name);
    fflush(stdout);
    if (test_failed) failed++;
    else passed++;
  }
  /* Background clean-up (releases on their way, a node reconnecting) would
     otherwise die with the process. */
  if (fencelock_settle(10000) != FENCELOCK_STATUS_OK) {
    fprintf(stderr, "FAIL fencelock_settle: background clean-up still running after 10 s\n");
    failed++;
  }
  redis_nodes_stop(&single);
  redis_nodes_stop(&trio);
  free((void *)self_path);
  printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
