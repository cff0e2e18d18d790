/*
 * The *_async calls: acquire / extend / release, fenced set, cancelling, and
 * *operation_out written before the operation can end (with the
 * `race-operation-out` helper process).
 */
#define _GNU_SOURCE
#include "support.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>

void test_async_acquire_and_release(void) {
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
  CHECK(atol(on_lock_key(&single, "PTTL", resource)) > 1000);

  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_lock_release_async(lock, on_done, &record, NULL, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock); /* allowed right away: the release keeps what it needs */
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.status == FENCELOCK_STATUS_OK);
  CHECK(strcmp(on_lock_key(&single, "EXISTS", resource), "0") == 0);
  fencelock_client_free(client);
}

void test_async_fenced_set(void) {
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

void test_async_cancel_fires_once_and_leaves_nothing(void) {
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
int race_operation_out(const char *url) {
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

void test_callback_may_free_the_request_holding_its_operation(void) {
  char command[1024];
  snprintf(command, sizeof command, "'%s' race-operation-out '%s'", self_path, single.urls[0]);
  CHECK(system(command) == 0);
}
