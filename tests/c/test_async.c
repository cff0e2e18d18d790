/*
 * The *_async calls: acquire / extend / release, fenced set, the reads
 * (fenced get, a semaphore's holders, inspect) and connecting, cancelling
 * (also in flight, on a paused node), and *operation_out written before the
 * operation can end (with the `race-operation-out` helper process).
 */
#define _GNU_SOURCE
#include "support.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

/* ---- reads and connecting as *_async calls -------------------------------- */

/* What the completion callbacks of the reads and of connecting saw. */
typedef struct read_record {
  atomic_int calls;
  fencelock_status status;
  size_t holders;
  char *value; /* the callback's, handed to the test to free */
  uint64_t token;
  fencelock_client *client;
  fencelock_inspection *inspection;
} read_record;

static void on_holders(void *user_data, fencelock_status status, size_t holders, fencelock_error *error) {
  read_record *record = user_data;
  record->status = status;
  record->holders = holders;
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

static void on_value(void *user_data, fencelock_status status, char *value, uint64_t token, fencelock_error *error) {
  read_record *record = user_data;
  record->status = status;
  record->value = value;
  record->token = token;
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

static void on_client(void *user_data, fencelock_status status, fencelock_client *client, fencelock_error *error) {
  read_record *record = user_data;
  record->status = status;
  record->client = client;
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

static void on_inspection(void *user_data, fencelock_status status, fencelock_inspection *inspection,
                          fencelock_error *error) {
  read_record *record = user_data;
  record->status = status;
  record->inspection = inspection;
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

/* Clears `record`, makes `call` (which reports to it) and waits for its callback; false if it failed or never came. */
#define FINISHED(record, call) (memset(&(record), 0, sizeof(record)), (call) == FENCELOCK_STATUS_OK && wait_for(&(record).calls, 1, 10000))

void test_async_reads_and_connect(void) {
  static read_record record;
  CHECK(FINISHED(record, fencelock_client_new_async(trio.url_list, 3, NULL, on_client, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.client != NULL);
  fencelock_client *client = record.client;
  const char *resource = unique("async-reads");
  fencelock_lock *lock = take(client, resource, 5000);
  CHECK(lock != NULL);
  fencelock_fence fence;
  CHECK_STATUS(fencelock_lock_fence(lock, &fence), FENCELOCK_STATUS_OK);

  /* A fenced read: absent, then what the lock's holder wrote. */
  static char key[160];
  snprintf(key, sizeof key, "%s:data", resource);
  CHECK(FINISHED(record, fencelock_fenced_get_async(client, key, on_value, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.value == NULL && record.token == 0);
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "v1", fence, NULL), FENCELOCK_STATUS_OK);
  fencelock_operation *operation = NULL;
  CHECK(FINISHED(record, fencelock_fenced_get_async(client, key, on_value, &record, &operation, NULL)));
  fencelock_operation_free(operation);
  CHECK(record.status == FENCELOCK_STATUS_OK && record.value != NULL);
  bool same = strcmp(record.value, "v1") == 0;
  fencelock_string_free(record.value);
  CHECK(same && record.token == fence.token);
  /* A key the read refuses is reported to the callback. */
  CHECK(FINISHED(record, fencelock_fenced_get_async(client, "", on_value, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_INVALID_ARGUMENT && record.value == NULL);
  /* A value holding a NUL byte (another front may write one; Lua's "\0" puts
     one there) is refused, not cut short or altered (before the fix: U+FFFD). */
  char nul_value[256];
  snprintf(nul_value, sizeof nul_value, "EVAL return(redis.call('HSET',KEYS[1],'value','a\\0b')) 1 %s", key);
  redis(&trio, 0, nul_value);
  CHECK(FINISHED(record, fencelock_fenced_get_async(client, key, on_value, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_INVALID_ARGUMENT && record.value == NULL);
  char *nul_read = (char *)0x1;
  uint64_t nul_token = 1;
  fencelock_error *nul_error = NULL;
  CHECK_STATUS(fencelock_fenced_get(client, key, &nul_read, &nul_token, &nul_error), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(nul_error != NULL && strstr(fencelock_error_message(nul_error), "NUL byte") != NULL);
  fencelock_error_free(nul_error);

  /* A semaphore's holders. */
  const char *name = unique("async-holders");
  fencelock_lock *permit = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 5000, 0, &permit, NULL), FENCELOCK_STATUS_OK);
  CHECK(FINISHED(record, fencelock_semaphore_holders_async(client, name, 2, on_holders, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.holders == 1);
  CHECK_STATUS(fencelock_lock_release(permit, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(permit);
  CHECK(FINISHED(record, fencelock_semaphore_holders_async(client, name, 2, on_holders, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_OK && record.holders == 0);

  /* Connecting: what fencelock_client_new returns as a status goes to the callback. */
  const char *bad[] = {"not a url"};
  CHECK(FINISHED(record, fencelock_client_new_async(bad, 1, NULL, on_client, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_CONFIG && record.client == NULL);
  CHECK(FINISHED(record, fencelock_client_new_async(NULL, 0, NULL, on_client, &record, NULL, NULL)));
  CHECK(record.status == FENCELOCK_STATUS_CONFIG && record.client == NULL);

  /* Bad arguments fail the call itself, and no callback comes. */
  memset(&record, 0, sizeof record);
  const char *not_utf8[] = {"redis://\xff"};
  CHECK_STATUS(fencelock_client_new_async(not_utf8, 1, NULL, on_client, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_client_new_async(NULL, 1, NULL, on_client, &record, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new_async(trio.url_list, 3, NULL, NULL, NULL, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_get_async(client, NULL, on_value, &record, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_get_async(NULL, key, on_value, &record, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_get_async(client, key, NULL, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders_async(client, name, 0, on_holders, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders_async(client, name, FENCELOCK_MAX_PERMITS + 1, on_holders, &record, NULL,
                                                 NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders_async(client, "", 2, on_holders, &record, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders_async(client, name, 2, NULL, NULL, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  sleep_ms(50);
  CHECK(atomic_load(&record.calls) == 0);

  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static long elapsed_ms(const struct timespec *since) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (now.tv_sec - since->tv_sec) * 1000 + (now.tv_nsec - since->tv_nsec) / 1000000;
}

/*
 * With the node paused (SIGSTOP), each read and a connect wait for the 5 s
 * timeouts; cancelled, each callback comes at once with CANCELLED.
 */
void test_async_reads_and_connect_cancelled_on_a_paused_node(void) {
  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 5000), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_connect_timeout_ms(options, 5000), FENCELOCK_STATUS_OK);
  fencelock_client *client = NULL;
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
  const char *resource = unique("async-paused");

  static read_record records[4];
  memset(records, 0, sizeof records);
  fencelock_operation *operations[4] = {NULL, NULL, NULL, NULL};
  fencelock_status started[4];
  CHECK(redis_nodes_run(&single, NULL, 0, "pause 0") == 0);
  started[0] = fencelock_client_new_async(single.url_list, 1, options, on_client, &records[0], &operations[0], NULL);
  started[1] = fencelock_fenced_get_async(client, resource, on_value, &records[1], &operations[1], NULL);
  started[2] = fencelock_semaphore_holders_async(client, resource, 2, on_holders, &records[2], &operations[2], NULL);
  started[3] = fencelock_inspect_async(client, resource, on_inspection, &records[3], &operations[3], NULL);
  sleep_ms(200);
  int early = 0;
  for (int i = 0; i < 4; i++) early += atomic_load(&records[i].calls);
  struct timespec cancelled;
  clock_gettime(CLOCK_MONOTONIC, &cancelled);
  for (int i = 0; i < 4; i++) fencelock_operation_cancel(operations[i]);
  int finished = 0;
  for (int i = 0; i < 4; i++) finished += wait_for(&records[i].calls, 1, 10000);
  long took = elapsed_ms(&cancelled);
  /* Going on before any check can return from the test: the next tests need the node. */
  CHECK(redis_nodes_run(&single, NULL, 0, "resume 0") == 0);
  for (int i = 0; i < 4; i++) CHECK_STATUS(started[i], FENCELOCK_STATUS_OK);
  CHECK(early == 0); /* each was waiting for the paused node */
  CHECK(finished == 4);
  if (took >= 2000) fprintf(stderr, "    the cancelled calls ended %ld ms after the cancel\n", took);
  CHECK(took < 2000); /* not the 5 s timeouts */
  for (int i = 0; i < 4; i++) {
    CHECK(records[i].status == FENCELOCK_STATUS_CANCELLED);
    fencelock_operation_free(operations[i]);
  }
  CHECK(records[0].client == NULL && records[1].value == NULL && records[3].inspection == NULL);
  fencelock_options_free(options);
  fencelock_client_free(client);
}
