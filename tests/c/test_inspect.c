/*
 * fencelock_inspect and fencelock_inspect_async: each node's view of a lock
 * (free, held with a waiter in line, released) on one node and on three, a
 * node that does not answer, and bad arguments.
 */
#define _GNU_SOURCE
#include "support.h"

#include <string.h>

/* What on_inspected saw. */
typedef struct inspect_record {
  atomic_int calls;
  fencelock_status status;
  fencelock_inspection *inspection; /* the callback's, handed to the test to free */
  fencelock_error *error;
} inspect_record;

static void on_inspected(void *user_data, fencelock_status status, fencelock_inspection *inspection,
                         fencelock_error *error) {
  inspect_record *record = user_data;
  record->status = status;
  record->inspection = inspection;
  record->error = error;
  atomic_fetch_add(&record->calls, 1);
}

/* The inspection of `resource`, or NULL (the caller's CHECK fails the test). */
static fencelock_inspection *inspect(fencelock_client *client, const char *resource) {
  fencelock_inspection *inspection = NULL;
  fencelock_error *error = NULL;
  if (fencelock_inspect(client, resource, &inspection, &error) != FENCELOCK_STATUS_OK) {
    fprintf(stderr, "    fencelock_inspect: %s\n", fencelock_error_message(error));
    fencelock_error_free(error);
    return NULL;
  }
  return inspection;
}

/* Whether every node of `inspection` shows `waiters` waiters. */
static bool every_node_has_waiters(const fencelock_inspection *inspection, uint64_t waiters) {
  size_t count = fencelock_inspection_node_count(inspection);
  for (size_t i = 0; i < count; i++) {
    if (fencelock_inspection_node(inspection, i)->waiters != waiters) return false;
  }
  return count > 0;
}

/* Whether every node of `inspection` holds the lock. */
static bool every_node_holds(const fencelock_inspection *inspection) {
  size_t count = fencelock_inspection_node_count(inspection);
  for (size_t i = 0; i < count; i++) {
    if (!fencelock_inspection_node(inspection, i)->held) return false;
  }
  return count > 0;
}

/* Whether no node of `inspection` holds the lock or has a waiter. */
static bool every_node_is_free(const fencelock_inspection *inspection) {
  size_t count = fencelock_inspection_node_count(inspection);
  for (size_t i = 0; i < count; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(inspection, i);
    if (state->held || state->waiters != 0) return false;
  }
  return count > 0;
}

/*
 * Waits up to `ms` for `seen` to hold of the inspection of `resource`. A
 * grant or a release returns once a majority decided: on three nodes the
 * last one may answer a little later.
 */
static bool wait_until(fencelock_client *client, const char *resource, bool (*seen)(const fencelock_inspection *),
                       long ms) {
  for (long waited = 0; waited < ms; waited += 10) {
    fencelock_inspection *inspection = inspect(client, resource);
    bool done = inspection != NULL && seen(inspection);
    fencelock_inspection_free(inspection);
    if (done) return true;
    sleep_ms(10);
  }
  return false;
}

static bool one_waiter_everywhere(const fencelock_inspection *inspection) {
  return every_node_holds(inspection) && every_node_has_waiters(inspection, 1);
}

/* Checks that every entry is a node that answered and shows a free lock whose counter is `counter` or more. */
static void check_free(const fencelock_inspection *inspection, int nodes, uint64_t counter) {
  CHECK(fencelock_inspection_node_count(inspection) == (size_t)nodes);
  for (int i = 0; i < nodes; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(inspection, (size_t)i);
    CHECK(state != NULL && state->error == NULL);
    CHECK(state->node != NULL && strstr(state->node, "127.0.0.1") != NULL && strchr(state->node, '@') == NULL);
    CHECK(!state->held && !state->has_ttl && state->ttl_ms == 0);
    CHECK(state->waiters == 0);
    CHECK(counter == 0 ? state->fencing_counter == 0 : state->fencing_counter >= counter);
  }
}

static void inspect_held_released_and_waiting(redis_nodes *nodes) {
  fencelock_client *client = connect_to(nodes);
  fencelock_client *other = connect_to(nodes);
  CHECK(client != NULL && other != NULL);
  const char *resource = unique("inspect");

  /* Never locked: no key, no ttl, no counter, no waiter, on every node. */
  fencelock_inspection *inspection = inspect(client, resource);
  CHECK(inspection != NULL);
  check_free(inspection, nodes->count, 0);
  if (test_failed) return;
  CHECK(fencelock_inspection_node(inspection, (size_t)nodes->count) == NULL); /* past the end */
  fencelock_inspection_free(inspection);

  /* Held, with one waiter in line. */
  fencelock_lock *lock = take(client, resource, 5000);
  CHECK(lock != NULL);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  static async_record waiter;
  memset(&waiter, 0, sizeof waiter);
  CHECK_STATUS(fencelock_acquire_async(other, resource, 5000, 20000, on_acquired, &waiter, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_until(client, resource, one_waiter_everywhere, 10000));
  inspection = inspect(client, resource);
  CHECK(inspection != NULL);
  CHECK(fencelock_inspection_node_count(inspection) == (size_t)nodes->count);
  uint64_t highest = 0;
  for (int i = 0; i < nodes->count; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(inspection, (size_t)i);
    CHECK(state != NULL && state->error == NULL);
    CHECK(state->held);
    CHECK(state->has_ttl && state->ttl_ms > 0 && state->ttl_ms <= 5000);
    CHECK(state->fencing_counter >= 1 && state->fencing_counter <= token);
    CHECK(state->waiters == 1);
    if (state->fencing_counter > highest) highest = state->fencing_counter;
  }
  CHECK(highest == token); /* the token is the highest counter of the nodes that granted */
  fencelock_inspection_free(inspection);

  /* The release hands the lock to the waiter: its token is the new counter. */
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  CHECK(wait_for(&waiter.calls, 1, 10000));
  CHECK(waiter.status == FENCELOCK_STATUS_OK && waiter.lock != NULL);
  uint64_t next = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(waiter.lock, &next), FENCELOCK_STATUS_OK);
  CHECK(next > token);
  inspection = inspect(client, resource);
  CHECK(inspection != NULL);
  highest = 0;
  int holding = 0;
  for (int i = 0; i < nodes->count; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(inspection, (size_t)i);
    CHECK(state->error == NULL);
    holding += state->held;
    if (state->fencing_counter > highest) highest = state->fencing_counter;
  }
  CHECK(holding > nodes->count / 2);
  CHECK(highest == next);
  fencelock_inspection_free(inspection);

  /* Released: not held anywhere, and the counters stay. */
  CHECK_STATUS(fencelock_lock_release(waiter.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(waiter.lock);
  CHECK(wait_until(client, resource, every_node_is_free, 10000));
  inspection = inspect(client, resource);
  CHECK(inspection != NULL);
  check_free(inspection, nodes->count, 1);
  if (test_failed) return;
  fencelock_inspection_free(inspection);
  fencelock_client_free(other);
  fencelock_client_free(client);
}

void test_inspect_held_released_and_waiting(void) { inspect_held_released_and_waiting(&single); }

void test_inspect_held_released_and_waiting_on_three_nodes(void) { inspect_held_released_and_waiting(&trio); }

void test_inspect_async(void) {
  fencelock_client *client = connect_to(&trio);
  CHECK(client != NULL);
  const char *resource = unique("inspect-async");
  fencelock_lock *lock = take(client, resource, 5000);
  CHECK(lock != NULL);
  static inspect_record record;
  memset(&record, 0, sizeof record);
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_inspect_async(client, resource, on_inspected, &record, &operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.inspection != NULL && record.error == NULL);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK); /* after the fact: no effect */
  fencelock_operation_free(operation);
  CHECK(fencelock_inspection_node_count(record.inspection) == 3);
  for (size_t i = 0; i < 3; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(record.inspection, i);
    CHECK(state->error == NULL && state->held && state->has_ttl && state->ttl_ms > 0 && state->fencing_counter >= 1);
  }
  fencelock_inspection_free(record.inspection);

  /* Bad arguments fail the call; the callback is never called. */
  memset(&record, 0, sizeof record);
  char too_long[FENCELOCK_MAX_RESOURCE_BYTES + 2];
  memset(too_long, 'r', sizeof too_long - 1);
  too_long[sizeof too_long - 1] = '\0';
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_inspect_async(client, "", on_inspected, &record, NULL, &error),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(error != NULL && strlen(fencelock_error_message(error)) > 10);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_inspect_async(client, too_long, on_inspected, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_inspect_async(client, "\xff", on_inspected, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_inspect_async(client, resource, NULL, &record, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_inspect_async(client, NULL, on_inspected, &record, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_inspect_async(NULL, resource, on_inspected, &record, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  sleep_ms(50);
  CHECK(atomic_load(&record.calls) == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

void test_inspect_shows_a_node_that_does_not_answer(void) {
  fencelock_client *client = connect_to(&trio);
  CHECK(client != NULL);
  const char *resource = unique("inspect-down");
  fencelock_lock *lock = take(client, resource, 5000);
  CHECK(lock != NULL);
  CHECK(wait_until(client, resource, every_node_holds, 10000));
  CHECK(redis_nodes_run(&trio, NULL, 0, "kill 2") == 0);
  fencelock_inspection *inspection = NULL;
  fencelock_status status = fencelock_inspect(client, resource, &inspection, NULL);
  /* Up again before any check can return from the test: the next tests need three nodes. */
  CHECK(redis_nodes_run(&trio, NULL, 0, "restart 2") == 0);
  CHECK_STATUS(status, FENCELOCK_STATUS_OK); /* a node down does not fail the call */
  CHECK(fencelock_inspection_node_count(inspection) == 3);
  for (size_t i = 0; i < 2; i++) {
    const fencelock_node_lock_state *state = fencelock_inspection_node(inspection, i);
    CHECK(state->error == NULL && state->held && state->fencing_counter >= 1);
  }
  const fencelock_node_lock_state *down = fencelock_inspection_node(inspection, 2);
  CHECK(down->error != NULL && strlen(down->error) > 0);
  CHECK(!down->held && !down->has_ttl && down->ttl_ms == 0 && down->fencing_counter == 0 && down->waiters == 0);
  CHECK(down->node != NULL && strcmp(down->node, trio.urls[2]) == 0);
  fencelock_inspection_free(inspection);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

void test_bad_inspect_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_inspection *sentinel = (fencelock_inspection *)0x1;
  fencelock_inspection *out = sentinel;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_inspect(NULL, "r", &out, &error), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "client") != NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_inspect(client, NULL, &out, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_inspect(client, "r", NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  error = NULL;
  CHECK_STATUS(fencelock_inspect(client, "", &out, &error), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strlen(fencelock_error_message(error)) > 10);
  fencelock_error_free(error);
  char too_long[FENCELOCK_MAX_RESOURCE_BYTES + 2];
  memset(too_long, 'r', sizeof too_long - 1);
  too_long[sizeof too_long - 1] = '\0';
  CHECK_STATUS(fencelock_inspect(client, too_long, &out, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_inspect(client, "a\xff" "b", &out, NULL), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK(out == sentinel); /* written on success only */
  /* The longest resource is fine. */
  too_long[FENCELOCK_MAX_RESOURCE_BYTES] = '\0';
  CHECK_STATUS(fencelock_inspect(client, too_long, &out, NULL), FENCELOCK_STATUS_OK);
  CHECK(out != sentinel && fencelock_inspection_node_count(out) == 1);
  fencelock_inspection_free(out);
  /* The readers take NULL. */
  CHECK(fencelock_inspection_node_count(NULL) == 0);
  CHECK(fencelock_inspection_node(NULL, 0) == NULL);
  fencelock_inspection_free(NULL);
  fencelock_client_free(client);
}
