/*
 * Counting semaphores: permits handed out as fencelock_locks, capacity under
 * contention from several threads (one node and three), permit numbers and
 * holders, clients that disagree on the number of permits, the callback
 * variants (woken by a release, cancelled, fair), a permit's loss, and bad
 * arguments.
 */
#define _GNU_SOURCE
#include "support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Runs `verb` (DEL, EXISTS, PTTL…) on the key of permit `permit` of semaphore `name` on node `index`. */
static const char *on_permit_key(redis_nodes *nodes, int index, const char *verb, const char *name, uint32_t permit) {
  char command[256];
  snprintf(command, sizeof command, "%s fencelock:{%s}:sem:%u", verb, name, permit);
  return redis(nodes, index, command);
}

/* On how many nodes of `nodes` `verb` on permit `permit`'s key answers `reply`. */
static int nodes_answering(redis_nodes *nodes, const char *verb, const char *name, uint32_t permit,
                           const char *reply) {
  int count = 0;
  for (int i = 0; i < nodes->count; i++) count += strcmp(on_permit_key(nodes, i, verb, name, permit), reply) == 0;
  return count;
}

/* Whether the semaphore's queue is empty on every node. */
static bool queues_empty(redis_nodes *nodes, const char *name) {
  char command[256];
  snprintf(command, sizeof command, "ZCARD fencelock:{%s}:sem:queue", name);
  for (int i = 0; i < nodes->count; i++) {
    if (strcmp(redis(nodes, i, command), "0") != 0) return false;
  }
  return true;
}

/* The permit number of `lock`, or UINT32_MAX when it is not a permit. */
static uint32_t permit_of(const fencelock_lock *lock) {
  uint32_t permit = UINT32_MAX;
  return fencelock_lock_permit(lock, &permit) ? permit : UINT32_MAX;
}

/* ---- capacity under contention ------------------------------------------ */

#define CONTENTION_PERMITS 3
#define MAX_WORKERS 8

typedef struct contention {
  redis_nodes *nodes;
  const char *name;
  int rounds;
  atomic_int inside;               /* holders inside their critical section now */
  atomic_int peak;                 /* the most ever inside at once */
  atomic_int occupied[CONTENTION_PERMITS]; /* who holds each permit number, in this process */
  atomic_ullong last_token[CONTENTION_PERMITS];
  atomic_int grants;
  atomic_int errors;               /* anything that must not happen, counted by the workers */
  char first_error[256];
} contention;

static void contention_error(contention *run, const char *what, fencelock_status status) {
  if (atomic_fetch_add(&run->errors, 1) == 0)
    snprintf(run->first_error, sizeof run->first_error, "%s (%s)", what, fencelock_status_name(status));
}

static void *contend(void *arg) {
  contention *run = arg;
  fencelock_client *client = connect_to(run->nodes);
  if (client == NULL) {
    contention_error(run, "connect", FENCELOCK_STATUS_OK);
    return NULL;
  }
  for (int round = 0; round < run->rounds; round++) {
    fencelock_lock *permit = NULL;
    fencelock_status status =
        fencelock_semaphore_acquire(client, run->name, CONTENTION_PERMITS, 5000, 60000, &permit, NULL);
    if (status != FENCELOCK_STATUS_OK) {
      contention_error(run, "acquire", status);
      break;
    }
    uint32_t number = permit_of(permit);
    uint64_t token = 0;
    fencelock_lock_fencing_token(permit, &token);
    int now = atomic_fetch_add(&run->inside, 1) + 1;
    for (int seen = atomic_load(&run->peak); now > seen && !atomic_compare_exchange_weak(&run->peak, &seen, now);) {
    }
    if (number >= CONTENTION_PERMITS) {
      contention_error(run, "a permit number out of range", FENCELOCK_STATUS_OK);
    } else {
      if (atomic_exchange(&run->occupied[number], 1) != 0)
        contention_error(run, "two holders of one permit number at once", FENCELOCK_STATUS_OK);
      /* One node: every grant's token is larger than every earlier grant's;
         three: each permit's successive holders get increasing tokens. */
      unsigned long long last = atomic_exchange(&run->last_token[number], token);
      if (token <= last) contention_error(run, "a permit's fencing token did not increase", FENCELOCK_STATUS_OK);
    }
    atomic_fetch_add(&run->grants, 1);
    /* First round: stay until another worker holds the other permit (up to
       2 s), so "more than one at once" is seen however slow the machine
       (valgrind makes each acquire slower than a short hold). */
    for (int waited = 0; round == 0 && atomic_load(&run->inside) < 2 && waited < 2000; waited += 5) sleep_ms(5);
    sleep_ms(2 + round % 4);
    if (number < CONTENTION_PERMITS) atomic_store(&run->occupied[number], 0);
    atomic_fetch_sub(&run->inside, 1);
    status = fencelock_lock_release(permit, NULL);
    if (status != FENCELOCK_STATUS_OK) contention_error(run, "release", status);
    fencelock_lock_free(permit);
  }
  fencelock_client_free(client);
  return NULL;
}

static void contention_on(redis_nodes *nodes, int workers, int rounds) {
  static contention run;
  memset(&run, 0, sizeof run);
  run.nodes = nodes;
  run.name = unique(nodes->count == 1 ? "sem-contend" : "sem-contend3");
  run.rounds = rounds;
  pthread_t threads[MAX_WORKERS];
  int started = 0;
  for (; started < workers; started++)
    if (pthread_create(&threads[started], NULL, contend, &run) != 0) break;
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  CHECK(started == workers);
  if (atomic_load(&run.errors) != 0) fprintf(stderr, "    first error: %s\n", run.first_error);
  CHECK(atomic_load(&run.errors) == 0);
  CHECK(atomic_load(&run.grants) == workers * rounds);
  int peak = atomic_load(&run.peak);
  CHECK(peak <= CONTENTION_PERMITS); /* never more holders than permits */
  CHECK(peak > 1);                   /* and more than one at once: not a mutex */
  /* All released: nothing held, and the permit keys are gone. */
  fencelock_client *client = connect_to(nodes);
  CHECK(client != NULL);
  size_t holders = 99;
  CHECK_STATUS(fencelock_semaphore_holders(client, run.name, CONTENTION_PERMITS, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 0);
  fencelock_client_free(client);
}

void test_semaphore_capacity_under_contention(void) { contention_on(&single, 6, 8); }

void test_semaphore_capacity_under_contention_on_three_nodes(void) { contention_on(&trio, 5, 6); }

/* ---- permit numbers, holders, release ------------------------------------ */

static void permits_and_holders(redis_nodes *nodes) {
  fencelock_client *client = connect_to(nodes);
  CHECK(client != NULL);
  const char *name = unique("sem-holders");
  size_t holders = 99;
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 3, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 0);

  fencelock_lock *permits[3] = {NULL, NULL, NULL};
  bool seen[3] = {false, false, false};
  uint64_t tokens[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++) {
    CHECK_STATUS(fencelock_semaphore_try_acquire(client, name, 3, 5000, &permits[i], NULL), FENCELOCK_STATUS_OK);
    uint32_t number = permit_of(permits[i]);
    CHECK(number < 3 && !seen[number]); /* three holders, three different permits */
    seen[number] = true;
    CHECK(strcmp(fencelock_lock_resource(permits[i]), name) == 0);
    CHECK_STATUS(fencelock_lock_fencing_token(permits[i], &tokens[i]), FENCELOCK_STATUS_OK);
    if (nodes->count == 1 && i > 0) CHECK(tokens[i] > tokens[i - 1]);
    bool held = false;
    CHECK_STATUS(fencelock_lock_is_held(permits[i], &held), FENCELOCK_STATUS_OK);
    CHECK(held);
    /* Each permit is its own key, on (at least) a majority of the nodes. */
    CHECK(nodes_answering(nodes, "EXISTS", name, number, "1") > nodes->count / 2);
    CHECK_STATUS(fencelock_semaphore_holders(client, name, 3, &holders, NULL), FENCELOCK_STATUS_OK);
    CHECK(holders == (size_t)i + 1);
  }
  /* Full: one attempt is NOT_ACQUIRED, a short wait TIMEOUT; nothing is written on failure. */
  fencelock_lock *refused = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_semaphore_try_acquire(client, name, 3, 5000, &refused, &error),
               FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_NOT_ACQUIRED);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 3, 5000, 150, &refused, NULL), FENCELOCK_STATUS_TIMEOUT);
  CHECK(refused == (fencelock_lock *)0x1);
  /* The timed-out waiter has left every queue when the call returns: a release
     made next is not handed to it. */
  CHECK(queues_empty(nodes, name));

  /* A permit extends as a lock does: its own key's ttl. */
  uint32_t first = permit_of(permits[0]);
  CHECK_STATUS(fencelock_lock_extend(permits[0], 20000, NULL), FENCELOCK_STATUS_OK);
  int extended = 0;
  for (int i = 0; i < nodes->count; i++) extended += atol(on_permit_key(nodes, i, "PTTL", name, first)) > 10000;
  CHECK(extended > nodes->count / 2);

  /* Releasing one frees that permit, and the next taker gets that number. */
  CHECK_STATUS(fencelock_lock_release(permits[0], NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(permits[0], NULL), FENCELOCK_STATUS_NOT_HELD);
  CHECK(nodes_answering(nodes, "EXISTS", name, first, "0") > nodes->count / 2);
  CHECK(permit_of(permits[0]) == first); /* still answers after release */
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 3, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 2);
  fencelock_lock *again = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 3, 5000, 0, &again, NULL), FENCELOCK_STATUS_OK);
  CHECK(permit_of(again) == first);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(again, &token), FENCELOCK_STATUS_OK);
  CHECK(token > tokens[0]); /* the next holder of a permit has a larger token */

  /* A lock of the same name is another thing entirely, and not a permit. */
  fencelock_lock *plain = take(client, name, 5000);
  CHECK(plain != NULL);
  uint32_t untouched = 77;
  CHECK(!fencelock_lock_permit(plain, &untouched) && untouched == 77);
  CHECK(fencelock_lock_permit(again, NULL)); /* permit may be NULL */
  CHECK(!fencelock_lock_permit(NULL, &untouched) && untouched == 77);

  CHECK_STATUS(fencelock_lock_release(plain, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(again, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(permits[1], NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(permits[2], NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 3, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 0);
  fencelock_lock_free(plain);
  fencelock_lock_free(again);
  for (int i = 0; i < 3; i++) fencelock_lock_free(permits[i]);
  fencelock_client_free(client);
}

void test_semaphore_permits_and_holders(void) { permits_and_holders(&single); }

void test_semaphore_permits_and_holders_on_three_nodes(void) { permits_and_holders(&trio); }

/* ---- clients that disagree ------------------------------------------------ */

void test_semaphore_permits_must_agree(void) {
  fencelock_client *first = connect_to(&single), *second = connect_to(&single);
  CHECK(first != NULL && second != NULL);
  const char *name = unique("sem-size");
  fencelock_lock *held = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(first, name, 2, 5000, 0, &held, NULL), FENCELOCK_STATUS_OK);

  fencelock_lock *other = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(second, name, 3, 5000, 1000, &other, &error),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "has 2 permits") != NULL);
  fencelock_error_free(error);
  error = NULL;
  CHECK_STATUS(fencelock_semaphore_try_acquire(second, name, 1, 5000, &other, &error),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "has 2 permits") != NULL);
  fencelock_error_free(error);
  CHECK(other == (fencelock_lock *)0x1);

  /* The callback variant starts (nothing wrong with the call) and reports it. */
  static async_record mismatched;
  memset(&mismatched, 0, sizeof mismatched);
  CHECK_STATUS(fencelock_semaphore_acquire_async(second, name, 5, 5000, 1000, on_acquired, &mismatched, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&mismatched.calls, 1, 5000));
  CHECK(mismatched.status == FENCELOCK_STATUS_INVALID_ARGUMENT && mismatched.lock == NULL);

  /* The agreed size still works for the second client. */
  fencelock_lock *agreed = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(second, name, 2, 5000, 0, &agreed, NULL), FENCELOCK_STATUS_OK);
  CHECK(permit_of(agreed) != permit_of(held) && permit_of(agreed) < 2);
  CHECK_STATUS(fencelock_lock_release(agreed, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(held, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(agreed);
  fencelock_lock_free(held);
  fencelock_client_free(first);
  fencelock_client_free(second);
}

/* ---- callback variants ---------------------------------------------------- */

void test_semaphore_async_acquire(void) {
  fencelock_client *holder = connect_to(&single), *waiter = connect_to(&single);
  CHECK(holder != NULL && waiter != NULL);
  const char *name = unique("sem-async");

  /* A free permit: the callback gets it. */
  static async_record got, woken, cancelled, busy;
  memset(&got, 0, sizeof got);
  memset(&woken, 0, sizeof woken);
  memset(&cancelled, 0, sizeof cancelled);
  memset(&busy, 0, sizeof busy);
  CHECK_STATUS(fencelock_semaphore_acquire_async(holder, name, 1, 5000, 0, on_acquired, &got, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&got.calls, 1, 5000));
  CHECK(got.status == FENCELOCK_STATUS_OK && got.lock != NULL && permit_of(got.lock) == 0);
  uint64_t first_token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(got.lock, &first_token), FENCELOCK_STATUS_OK);

  /* Full, no wait: NOT_ACQUIRED through the callback. */
  CHECK_STATUS(fencelock_semaphore_acquire_async(waiter, name, 1, 5000, 0, on_acquired, &busy, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&busy.calls, 1, 5000));
  CHECK(busy.status == FENCELOCK_STATUS_NOT_ACQUIRED && busy.lock == NULL);

  /* A cancelled waiter is told CANCELLED, once, and leaves nothing behind. */
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire_async(waiter, name, 1, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired,
                                                 &cancelled, &operation, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(100);
  CHECK(atomic_load(&cancelled.calls) == 0);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&cancelled.calls, 1, 5000));
  CHECK(cancelled.status == FENCELOCK_STATUS_CANCELLED && cancelled.lock == NULL);
  fencelock_operation_free(operation);

  /* A waiter is woken by the release, well before any retry would find the permit. */
  CHECK_STATUS(fencelock_semaphore_acquire_async(waiter, name, 1, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &woken,
                                                 NULL, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&woken.calls) == 0); /* waiting in line */
  CHECK_STATUS(fencelock_lock_release(got.lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&woken.calls, 1, 10000));
  CHECK(woken.status == FENCELOCK_STATUS_OK && permit_of(woken.lock) == 0);
  uint64_t next_token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(woken.lock, &next_token), FENCELOCK_STATUS_OK);
  CHECK(next_token > first_token);
  sleep_ms(100);
  CHECK(atomic_load(&cancelled.calls) == 1 && atomic_load(&woken.calls) == 1); /* each exactly once */

  /* Release through the callback variant: the permit is free again. */
  static async_record released;
  memset(&released, 0, sizeof released);
  CHECK_STATUS(fencelock_lock_release_async(woken.lock, on_done, &released, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&released.calls, 1, 5000));
  CHECK(released.status == FENCELOCK_STATUS_OK);
  size_t holders = 99;
  CHECK_STATUS(fencelock_semaphore_holders(holder, name, 1, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 0);
  fencelock_lock_free(got.lock);
  fencelock_lock_free(woken.lock);
  fencelock_client_free(holder);
  fencelock_client_free(waiter);
}

/* With a live waiter first in the semaphore's line, a fair request is refused
 * though every permit is free; one without fair takes a permit. Both the
 * blocking and the callback variant carry the options. */
void test_semaphore_fair_option(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("sem-fair");
  char command[256];
  snprintf(command, sizeof command, "ZADD fencelock:{%s}:sem:queue 1 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", name);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  snprintf(command, sizeof command,
           "ZADD fencelock:{%s}:sem:leases 99999999999999 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", name);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(5000, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_wait_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_fair(options, true), FENCELOCK_STATUS_OK);
  fencelock_lock *permit = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire_with(client, name, 2, options, &permit, NULL),
               FENCELOCK_STATUS_NOT_ACQUIRED);
  static async_record fair, unfair;
  memset(&fair, 0, sizeof fair);
  memset(&unfair, 0, sizeof unfair);
  CHECK_STATUS(fencelock_semaphore_acquire_with_async(client, name, 2, options, on_acquired, &fair, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&fair.calls, 1, 5000));
  CHECK(fair.status == FENCELOCK_STATUS_NOT_ACQUIRED);
  size_t holders = 99;
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 2, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 0);

  CHECK_STATUS(fencelock_lock_options_set_fair(options, false), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_semaphore_acquire_with(client, name, 2, options, &permit, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_semaphore_acquire_with_async(client, name, 2, options, on_acquired, &unfair, NULL, NULL),
               FENCELOCK_STATUS_OK);
  fencelock_lock_options_free(options); /* copied by the calls */
  CHECK(wait_for(&unfair.calls, 1, 5000));
  CHECK(unfair.status == FENCELOCK_STATUS_OK && unfair.lock != NULL);
  CHECK(permit_of(permit) + permit_of(unfair.lock) == 1); /* permits 0 and 1 */
  CHECK_STATUS(fencelock_lock_release(permit, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(unfair.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(permit);
  fencelock_lock_free(unfair.lock);
  fencelock_client_free(client);
}

/* ---- loss ----------------------------------------------------------------- */

typedef struct permit_loss {
  atomic_int calls;
  fencelock_loss_reason reason;
} permit_loss;

static void on_permit_lost(void *user_data, fencelock_loss_reason reason) {
  permit_loss *record = user_data;
  record->reason = reason;
  atomic_fetch_add(&record->calls, 1);
}

void test_semaphore_permit_lost(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("sem-lost");
  fencelock_lock *pulled = NULL, *called = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 1000, 0, &pulled, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 1000, 0, &called, NULL), FENCELOCK_STATUS_OK);
  static permit_loss record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_lock_on_lost(called, on_permit_lost, &record, NULL), FENCELOCK_STATUS_OK);
  uint32_t number = permit_of(pulled);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(pulled, &token), FENCELOCK_STATUS_OK);

  /* Renewals keep both past their 1 s ttl. */
  sleep_ms(1500);
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(pulled, &held), FENCELOCK_STATUS_OK);
  CHECK(held);

  /* One permit's key deleted behind its back: that permit, and only it, is lost. */
  CHECK(strcmp(on_permit_key(&single, 0, "DEL", name, number), "1") == 0);
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 10000, &event), FENCELOCK_STATUS_OK);
  CHECK(event.kind == FENCELOCK_EVENT_LOCK_LOST && event.reason == FENCELOCK_LOSS_DELETED);
  CHECK(event.fencing_token == token && strcmp(event.resource, name) == 0);
  fencelock_event_clear(&event);
  CHECK_STATUS(fencelock_lock_is_held(pulled, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  CHECK_STATUS(fencelock_lock_extend(pulled, 1000, NULL), FENCELOCK_STATUS_LOST);
  CHECK_STATUS(fencelock_lock_release(pulled, NULL), FENCELOCK_STATUS_NOT_HELD);
  CHECK_STATUS(fencelock_lock_is_held(called, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  CHECK(atomic_load(&record.calls) == 0);
  size_t holders = 99;
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 2, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 1);

  /* The other one through its own lost callback. */
  CHECK(strcmp(on_permit_key(&single, 0, "DEL", name, permit_of(called)), "1") == 0);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.reason == FENCELOCK_LOSS_DELETED);
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT); /* the callback had it */
  fencelock_lock_free(pulled);
  fencelock_lock_free(called);
  fencelock_client_free(client);
}

/* ---- bad arguments -------------------------------------------------------- */

void test_bad_semaphore_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("sem-bad");
  CHECK(FENCELOCK_MAX_PERMITS == 256 && fencelock_get_limits()->max_permits == FENCELOCK_MAX_PERMITS);
  fencelock_lock *lock = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  size_t holders = 99;
  static async_record never;
  memset(&never, 0, sizeof never);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(1000, &options), FENCELOCK_STATUS_OK);

  const uint32_t bad_permits[] = {0, FENCELOCK_MAX_PERMITS + 1, UINT32_MAX};
  for (size_t i = 0; i < sizeof bad_permits / sizeof bad_permits[0]; i++) {
    uint32_t permits = bad_permits[i];
    CHECK_STATUS(fencelock_semaphore_acquire(client, name, permits, 1000, 0, &lock, &error),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(fencelock_error_message(error), "permits") != NULL);
    fencelock_error_free(error);
    error = NULL;
    CHECK_STATUS(fencelock_semaphore_try_acquire(client, name, permits, 1000, &lock, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_semaphore_acquire_with(client, name, permits, options, &lock, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_semaphore_acquire_async(client, name, permits, 1000, 0, on_acquired, &never, NULL, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(
        fencelock_semaphore_acquire_with_async(client, name, permits, options, on_acquired, &never, NULL, NULL),
        FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(fencelock_semaphore_holders(client, name, permits, &holders, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
  }
  /* Bad names, ttls and waits, NULLs: refused by the call, the callback never called. */
  CHECK_STATUS(fencelock_semaphore_acquire(client, "", 2, 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire(client, "\xff", 2, 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_semaphore_acquire(client, NULL, 2, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire(NULL, name, 2, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 1000, 0, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 0, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 2, 1000, FENCELOCK_MAX_WAIT_MS + 1, &lock, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_with(client, name, 2, NULL, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_async(client, name, 2, 0, 0, on_acquired, &never, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_async(client, name, 2, 1000, FENCELOCK_MAX_WAIT_MS + 1, on_acquired,
                                                 &never, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_async(client, "", 2, 1000, 0, on_acquired, &never, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_async(client, name, 2, 1000, 0, NULL, NULL, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_acquire_with_async(client, name, 2, NULL, on_acquired, &never, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders(client, name, 2, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders(client, "", 2, &holders, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_semaphore_holders(NULL, name, 2, &holders, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(lock == (fencelock_lock *)0x1 && holders == 99); /* untouched on failure */
  sleep_ms(100);
  CHECK(atomic_load(&never.calls) == 0); /* a refused start never calls back */
  fencelock_lock_options_free(options);

  /* The bounds themselves are fine: 1 permit, and FENCELOCK_MAX_PERMITS. */
  fencelock_lock *one = NULL, *widest = NULL;
  CHECK_STATUS(fencelock_semaphore_acquire(client, name, 1, 1000, 0, &one, NULL), FENCELOCK_STATUS_OK);
  CHECK(permit_of(one) == 0);
  const char *wide = unique("sem-wide");
  CHECK_STATUS(fencelock_semaphore_acquire(client, wide, FENCELOCK_MAX_PERMITS, 1000, 0, &widest, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(permit_of(widest) < FENCELOCK_MAX_PERMITS);
  CHECK_STATUS(fencelock_semaphore_holders(client, wide, FENCELOCK_MAX_PERMITS, &holders, NULL), FENCELOCK_STATUS_OK);
  CHECK(holders == 1);
  fencelock_lock_release(one, NULL);
  fencelock_lock_release(widest, NULL);
  fencelock_lock_free(one);
  fencelock_lock_free(widest);
  fencelock_client_free(client);
}
