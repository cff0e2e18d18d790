/*
 * Taking and keeping locks: acquire / extend / release, contention in one
 * process and across processes (with the `hold` helper process), fencing
 * tokens and fenced writes, a lock freed while renewed or outliving its
 * client, the Redlock quorum on three nodes, and the C example
 * (examples/c/inventory.c) run as three contending processes.
 */
#define _GNU_SOURCE
#include "support.h"

#include <stdlib.h>
#include <string.h>

void test_acquire_extend_release(void) {
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
  CHECK(strcmp(on_lock_key(&single, "EXISTS", resource), "0") == 0);

  /* Double release and extend after release: documented statuses, with detail. */
  CHECK_STATUS(fencelock_lock_release(lock, &error), FENCELOCK_STATUS_NOT_HELD);
  CHECK(error != NULL && fencelock_error_status(error) == FENCELOCK_STATUS_NOT_HELD);
  CHECK(strstr(fencelock_error_message(error), resource) != NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_lock_extend(lock, 1000, NULL), FENCELOCK_STATUS_NOT_HELD);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

void test_contention_in_one_process(void) {
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

void test_contention_across_processes(void) {
  const char *resource = unique("procs");
  /* Connected first: under valgrind connecting alone can take a good part of the child's hold. */
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  char command[1024];
  snprintf(command, sizeof command, "'%s' hold '%s' '%s' 2000", self_path, single.urls[0], resource);
  FILE *child = popen(command, "r");
  CHECK(child != NULL);
  unsigned long long child_token = 0;
  CHECK(fscanf(child, "token %llu", &child_token) == 1);

  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_try_acquire(client, resource, 1000, &lock, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  /* The child releases after 2 s; waiting up to 10 s must get the lock. */
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 10000, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(token > child_token);
  CHECK(pclose(child) == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

/* Helper process (`test_fencelock hold URL RESOURCE MS`): takes the lock,
   prints its token, holds it MS milliseconds, releases it. */
int hold(const char *url, const char *resource, long ms) {
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

void test_fencing_tokens_and_fenced_writes(void) {
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

void test_free_while_renewing_lets_key_expire(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("free-held");
  fencelock_lock *lock = NULL;
  /* A 1 s lease, not shorter: renewals a third of it apart stay on time under valgrind. */
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  sleep_ms(1500); /* still there only if renewed */
  CHECK(strcmp(on_lock_key(&single, "EXISTS", resource), "1") == 0);
  fencelock_lock_free(lock);
  int gone = 0;
  for (int i = 0; i < 200 && !gone; i++) {
    gone = strcmp(on_lock_key(&single, "EXISTS", resource), "0") == 0;
    if (!gone) sleep_ms(20);
  }
  CHECK(gone);
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);
  fencelock_client_free(client);
}

void test_release_after_client_free(void) {
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

void test_redlock_quorum(void) {
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

void test_inventory_example(void) {
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

/* A lock taken with `options` on a fresh resource; NULL when the acquire failed. */
static fencelock_lock *take_with(fencelock_client *client, const char *name, const fencelock_lock_options *options) {
  fencelock_lock *lock = NULL;
  if (fencelock_acquire_with(client, unique(name), options, &lock, NULL) != FENCELOCK_STATUS_OK) return NULL;
  return lock;
}

/* Fair waiting: with a live waiter first in line, a fair acquire is refused
 * even though the lock is free, and one without `fair` takes it. */
void test_fair_option(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *resource = unique("fair");
  char command[256];
  /* A waiter with a long lease, as a live waiter between two attempts looks. */
  snprintf(command, sizeof command, "ZADD fencelock:{%s}:queue 1 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  snprintf(command, sizeof command, "ZADD fencelock:{%s}:leases 99999999999999 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1",
           resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(5000, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_wait_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_fair(options, true), FENCELOCK_STATUS_OK);
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire_with(client, resource, options, &lock, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(lock == NULL);
  CHECK(strcmp(on_lock_key(&single, "EXISTS", resource), "0") == 0);
  CHECK_STATUS(fencelock_lock_options_set_fair(options, false), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire_with(client, resource, options, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(lock != NULL);
  CHECK_STATUS(fencelock_lock_options_set_fair(NULL, true), FENCELOCK_STATUS_NULL_ARGUMENT);
  fencelock_lock_options_free(options);
  if (lock != NULL) {
    CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
    fencelock_lock_free(lock);
  }
  fencelock_client_free(client);
}

/* Per-lock options: auto-renew off, a renewal cap and a hold cap each let a
 * 300 ms lease run out while the lock with defaults keeps being renewed (its
 * lease is 1 s, so that renewals stay on time under valgrind; the test
 * sleeps past it). */
void test_lock_options(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(1000, &options), FENCELOCK_STATUS_OK);
  fencelock_lock *renewed = take_with(client, "opts-default", options);
  fencelock_lock_options_free(options);
  CHECK_STATUS(fencelock_lock_options_new(300, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_auto_renew(options, false), FENCELOCK_STATUS_OK);
  fencelock_lock *fixed = take_with(client, "opts-fixed", options);
  CHECK_STATUS(fencelock_lock_options_set_auto_renew(options, true), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_max_renewals(options, 1), FENCELOCK_STATUS_OK);
  fencelock_lock *counted = take_with(client, "opts-renewals", options);
  fencelock_lock_options_free(options);
  CHECK_STATUS(fencelock_lock_options_new(300, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_max_hold_ms(options, 400), FENCELOCK_STATUS_OK);
  fencelock_lock *capped = take_with(client, "opts-hold", options);
  CHECK(renewed != NULL && fixed != NULL && counted != NULL && capped != NULL);

  sleep_ms(1500);
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(renewed, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  fencelock_lock *ended[] = {fixed, counted, capped};
  for (int i = 0; i < 3; i++) {
    CHECK_STATUS(fencelock_lock_is_held(ended[i], &held), FENCELOCK_STATUS_OK);
    CHECK(!held);
    CHECK(strcmp(on_lock_key(&single, "EXISTS", fencelock_lock_resource(ended[i])), "0") == 0);
  }

  /* The wait comes from the options too: 0 is one attempt. */
  fencelock_lock *busy = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_lock_options_set_wait_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire_with(client, fencelock_lock_resource(renewed), options, &busy, &error),
               FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(busy == NULL && error != NULL);
  fencelock_error_free(error);
  static async_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_acquire_with_async(client, fencelock_lock_resource(renewed), options, on_acquired, &record,
                                            NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_NOT_ACQUIRED && record.lock == NULL);
  fencelock_lock_options_free(options);

  /* Bad options fail the call itself: a ttl out of range, or no options. */
  CHECK_STATUS(fencelock_lock_options_new(0, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire_with(client, unique("opts-bad"), options, &busy, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_with_async(client, unique("opts-bad"), options, on_acquired, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  fencelock_lock_options_free(options);
  CHECK_STATUS(fencelock_acquire_with(client, unique("opts-null"), NULL, &busy, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_options_set_wait_ms(NULL, 1), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_options_new(1, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  fencelock_lock_options_free(NULL);

  CHECK_STATUS(fencelock_lock_release(renewed, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock *all[] = {renewed, fixed, counted, capped};
  for (int i = 0; i < 4; i++) fencelock_lock_free(all[i]);
  fencelock_client_free(client);
}
