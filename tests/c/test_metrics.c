/*
 * A client's metrics (fencelock_client_metrics): counters that move exactly
 * as a scripted scenario says (acquire, contend, wait, release, renew, lose,
 * cancel), and the snapshot struct's contract (size, NULLs, look-ups).
 * The bucket bounds are checked against the vectors in test_vectors.c.
 */
#define _GNU_SOURCE
#include "support.h"

#include <string.h>

/* A snapshot of `client` into `*m`, whose other bytes are garbage first:
 * the call needs only `size` set. */
static fencelock_status snapshot(fencelock_client *client, fencelock_metrics *m) {
  memset(m, 0xa5, sizeof *m);
  m->size = sizeof *m;
  return fencelock_client_metrics(client, m, NULL);
}

/* Takes snapshots of `client` into `m` until `cond` holds or `ms` passed;
 * the caller CHECKs `cond` afterwards. */
#define SNAPSHOT_UNTIL(client, m, cond, ms)                                    \
  do {                                                                         \
    for (long waited_ = 0;; waited_ += 10) {                                   \
      CHECK_STATUS(snapshot((client), &(m)), FENCELOCK_STATUS_OK);             \
      if ((cond) || waited_ >= (ms)) break;                                    \
      sleep_ms(10);                                                            \
    }                                                                          \
  } while (0)

/* Every failure count but `kind`'s is zero, and `kind`'s is `count`; the
 * table lists each error kind once, in the order of their numbers. */
static int failed_only(const fencelock_metrics *m, fencelock_status kind, uint64_t count) {
  if (m->n_failed < 13 || m->n_failed > FENCELOCK_METRICS_MAX_KINDS) return 0;
  for (size_t i = 0; i < m->n_failed; i++) {
    const fencelock_failure_count *entry = &m->failed[i];
    if (strcmp(fencelock_status_name(entry->kind), "FENCELOCK_STATUS_UNKNOWN") == 0) return 0;
    if (entry->kind == FENCELOCK_STATUS_OK || (i > 0 && entry->kind <= m->failed[i - 1].kind)) return 0;
    if (entry->count != (entry->kind == kind ? count : 0)) return 0;
  }
  return fencelock_metrics_failed(m, kind) == count;
}

/* Every loss count but `reason`'s is zero, and `reason`'s is `count`. */
static int lost_only(const fencelock_metrics *m, fencelock_loss_reason reason, uint64_t count) {
  if (m->n_lost != 4) return 0;
  for (size_t i = 0; i < m->n_lost; i++) {
    if (m->lost[i].reason == FENCELOCK_LOSS_OTHER) return 0;
    if (m->lost[i].count != (m->lost[i].reason == reason ? count : 0)) return 0;
  }
  return fencelock_metrics_lost(m, reason) == count;
}

/* The latency histogram is consistent: `count` samples, a positive sum,
 * cumulative buckets, and quantiles that are bucket bounds. */
static int latency_consistent(const fencelock_metrics *m, uint64_t count) {
  const uint64_t *bounds = fencelock_latency_buckets();
  if (m->latency_count != count || m->latency_sum_ns == 0) return 0;
  for (int i = 1; i < FENCELOCK_LATENCY_BUCKET_COUNT; i++)
    if (m->latency_buckets[i] < m->latency_buckets[i - 1]) return 0;
  if (m->latency_buckets[FENCELOCK_LATENCY_BUCKET_COUNT - 1] > count) return 0;
  int p50_is_bound = 0, p99_is_bound = 0;
  for (int i = 0; i < FENCELOCK_LATENCY_BUCKET_COUNT; i++) {
    p50_is_bound |= m->latency_p50_ns == bounds[i];
    p99_is_bound |= m->latency_p99_ns == bounds[i];
  }
  /* Every call here took well under the last bound (10 s). */
  return p50_is_bound && p99_is_bound && m->latency_p50_ns <= m->latency_p99_ns;
}

void test_metrics_follow_a_scripted_scenario(void) {
  fencelock_client *a = connect_to(&single), *b = connect_to(&single), *c = connect_to(&single);
  CHECK(a != NULL && b != NULL && c != NULL);
  const char *resource = unique("metrics");
  fencelock_metrics m;

  /* Nothing yet: zeros, and no latency estimate. */
  CHECK_STATUS(snapshot(a, &m), FENCELOCK_STATUS_OK);
  CHECK(m.size == sizeof m && m.acquired == 0 && m.held == 0 && m.latency_count == 0);
  CHECK(m.latency_p50_ns == FENCELOCK_LATENCY_NONE && m.latency_p99_ns == FENCELOCK_LATENCY_NONE);
  CHECK(failed_only(&m, FENCELOCK_STATUS_NOT_ACQUIRED, 0) && lost_only(&m, FENCELOCK_LOSS_DELETED, 0));

  /* A takes the lock: one acquisition, one lock held, one latency sample. */
  fencelock_lock *held = NULL;
  CHECK_STATUS(fencelock_acquire(a, resource, 10000, 0, &held, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(snapshot(a, &m), FENCELOCK_STATUS_OK);
  CHECK(m.acquired == 1 && m.held == 1 && m.waiting == 0 && m.released == 0);
  CHECK(failed_only(&m, FENCELOCK_STATUS_NOT_ACQUIRED, 0) && latency_consistent(&m, 1));

  /* B contends: a refused try is a failure of kind NOT_ACQUIRED. */
  fencelock_lock *refused = NULL;
  CHECK_STATUS(fencelock_try_acquire(b, resource, 10000, &refused, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(snapshot(b, &m), FENCELOCK_STATUS_OK);
  CHECK(m.acquired == 0 && m.held == 0);
  CHECK(failed_only(&m, FENCELOCK_STATUS_NOT_ACQUIRED, 1) && latency_consistent(&m, 1));

  /* B waits (async): counted as waiting until A's release hands it the lock. */
  static async_record waiter;
  memset(&waiter, 0, sizeof waiter);
  CHECK_STATUS(fencelock_acquire_async(b, resource, 1000, 10000, on_acquired, &waiter, NULL, NULL),
               FENCELOCK_STATUS_OK);
  SNAPSHOT_UNTIL(b, m, m.waiting == 1, 5000);
  CHECK(m.waiting == 1 && m.acquired == 0);
  sleep_ms(100);
  CHECK_STATUS(snapshot(b, &m), FENCELOCK_STATUS_OK);
  CHECK(m.waiting == 1 && atomic_load(&waiter.calls) == 0);
  CHECK_STATUS(fencelock_lock_release(held, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(held);
  CHECK_STATUS(snapshot(a, &m), FENCELOCK_STATUS_OK);
  CHECK(m.released == 1 && m.held == 0 && m.acquired == 1);
  CHECK(wait_for(&waiter.calls, 1, 10000) && waiter.status == FENCELOCK_STATUS_OK);
  fencelock_lock *lock = waiter.lock;
  CHECK_STATUS(snapshot(b, &m), FENCELOCK_STATUS_OK);
  CHECK(m.acquired == 1 && m.waiting == 0 && m.held == 1);
  CHECK(failed_only(&m, FENCELOCK_STATUS_NOT_ACQUIRED, 1) && latency_consistent(&m, 2));

  /* B's 1 s lease renews (every ttl/3; a late renewal would see it expired, not deleted); then its key goes: one loss, deleted. */
  SNAPSHOT_UNTIL(b, m, m.renewals >= 1, 5000);
  CHECK(m.renewals >= 1 && m.renewal_failures == 0);
  CHECK(strcmp(on_lock_key(&single, "DEL", resource), "1") == 0);
  SNAPSHOT_UNTIL(b, m, m.held == 0, 10000);
  CHECK(m.held == 0 && lost_only(&m, FENCELOCK_LOSS_DELETED, 1));
  CHECK(m.renewal_failures == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_NOT_HELD);
  fencelock_lock_free(lock);
  CHECK_STATUS(snapshot(b, &m), FENCELOCK_STATUS_OK);
  CHECK(m.released == 0); /* a failed release is no release */

  /* C's waiting acquire, cancelled: a failure of kind CANCELLED, no longer waiting. */
  fencelock_lock *blocker = NULL;
  CHECK_STATUS(fencelock_acquire(a, resource, 10000, 0, &blocker, NULL), FENCELOCK_STATUS_OK);
  static async_record cancelled;
  memset(&cancelled, 0, sizeof cancelled);
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_acquire_async(c, resource, 10000, 30000, on_acquired, &cancelled, &operation, NULL),
               FENCELOCK_STATUS_OK);
  SNAPSHOT_UNTIL(c, m, m.waiting == 1, 5000);
  CHECK(m.waiting == 1);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&cancelled.calls, 1, 10000) && cancelled.status == FENCELOCK_STATUS_CANCELLED);
  fencelock_operation_free(operation);
  CHECK_STATUS(snapshot(c, &m), FENCELOCK_STATUS_OK);
  CHECK(m.waiting == 0 && m.acquired == 0 && m.held == 0);
  CHECK(failed_only(&m, FENCELOCK_STATUS_CANCELLED, 1) && latency_consistent(&m, 1));

  /* Latency counts every acquire call: A made 2, B 2, C 1. */
  CHECK_STATUS(snapshot(a, &m), FENCELOCK_STATUS_OK);
  CHECK(m.acquired == 2 && m.held == 1 && latency_consistent(&m, 2));
  CHECK_STATUS(fencelock_lock_release(blocker, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(blocker);
  CHECK_STATUS(snapshot(a, &m), FENCELOCK_STATUS_OK);
  CHECK(m.released == 2 && m.held == 0 && lost_only(&m, FENCELOCK_LOSS_DELETED, 0));
  fencelock_client_free(a);
  fencelock_client_free(b);
  fencelock_client_free(c);
}

void test_metrics_arguments_and_sizes(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_metrics m;
  memset(&m, 0, sizeof m);
  m.acquired = 77; /* written only on success */
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_client_metrics(client, &m, &error), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "sizeof(fencelock_metrics)") != NULL);
  fencelock_error_free(error);
  CHECK(m.acquired == 77 && m.size == 0);
  m.size = sizeof m - 1;
  CHECK_STATUS(fencelock_client_metrics(client, &m, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(m.acquired == 77);
  CHECK_STATUS(fencelock_client_metrics(NULL, &m, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_metrics(client, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(fencelock_metrics_failed(NULL, FENCELOCK_STATUS_NOT_ACQUIRED) == 0);
  CHECK(fencelock_metrics_lost(NULL, FENCELOCK_LOSS_DELETED) == 0);

  /* A caller built against a later, larger struct: the bytes past this
   * header's struct stay the caller's, and `size` says what was written. */
  struct {
    fencelock_metrics known;
    uint64_t later[4];
  } bigger;
  memset(&bigger, 0xa5, sizeof bigger);
  bigger.known.size = sizeof bigger;
  CHECK_STATUS(fencelock_client_metrics(client, &bigger.known, NULL), FENCELOCK_STATUS_OK);
  CHECK(bigger.known.size == sizeof(fencelock_metrics));
  CHECK(bigger.known.acquired == 0 && bigger.known.latency_count == 0);
  for (int i = 0; i < 4; i++) CHECK(bigger.later[i] == 0xa5a5a5a5a5a5a5a5ULL);

  /* Look-ups of what is no error kind or loss reason find nothing. */
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, "", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(snapshot(client, &m), FENCELOCK_STATUS_OK);
  CHECK(fencelock_metrics_failed(&m, FENCELOCK_STATUS_INVALID_ARGUMENT) == 1);
  CHECK(fencelock_metrics_failed(&m, FENCELOCK_STATUS_OK) == 0);
  CHECK(fencelock_metrics_failed(&m, FENCELOCK_STATUS_NULL_ARGUMENT) == 0);
  CHECK(fencelock_metrics_failed(&m, -1) == 0);
  CHECK(fencelock_metrics_lost(&m, FENCELOCK_LOSS_OTHER) == 0);
  CHECK(m.latency_count == 1 && m.acquired == 0);
  fencelock_client_free(client);
}
