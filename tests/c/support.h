/*
 * What the C test files share: the nodes every test runs against (started in
 * main.c), the CHECK macros, small helpers (sleep_ms, unique, connect_to,
 * redis, wait_for, take), the completion callbacks several files use, and the
 * tests and helper processes each file gives main.c to run.
 */
#ifndef FENCELOCK_TEST_SUPPORT_H
#define FENCELOCK_TEST_SUPPORT_H

#include <fencelock.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "harness.h"

/* ---- defined in main.c -------------------------------------------------- */

extern redis_nodes single;    /* one node */
extern redis_nodes trio;      /* three nodes: a Redlock quorum */
extern const char *self_path; /* this program, run again as a helper process */
extern int test_failed;       /* set by CHECK and CHECK_STATUS */
extern int test_skipped;      /* set by SKIP */
extern char skip_reason[1024]; /* why, printed by main.c */

/* Each fails the running test and returns from the function it is used in. */
#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      fprintf(stderr, "    %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      test_failed = 1;                                                         \
      return;                                                                  \
    }                                                                          \
  } while (0)

/* The test cannot run here (what it needs is missing): reported as skipped, saying why. */
#define SKIP(...)                                                              \
  do {                                                                         \
    snprintf(skip_reason, sizeof skip_reason, __VA_ARGS__);                    \
    test_skipped = 1;                                                          \
    return;                                                                    \
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

/*
 * None of these tests is about node timeouts, and they also run under
 * valgrind on a busy machine: a generous per-node timeout keeps a slow
 * answer from turning "held by another" into "timed out" or "unavailable".
 */
#define GENEROUS_NODE_TIMEOUT_MS 5000

/* ---- helpers (support.c) ------------------------------------------------ */

void sleep_ms(long ms);
/* A resource name no other test (or earlier run) uses. */
const char *unique(const char *name);
/* A client with the generous node timeout; `auto_renew` false lets every lock expire at its ttl. */
fencelock_client *connect_with_renewal(redis_nodes *nodes, bool auto_renew);
fencelock_client *connect_to(redis_nodes *nodes);
/* Runs a Redis command on node `index` through the harness; returns the reply. */
const char *redis(redis_nodes *nodes, int index, const char *command);
/* Runs `verb` (DEL, EXISTS, PTTL…) on the lock key of `resource` on node 0; returns the reply. */
const char *on_lock_key(redis_nodes *nodes, const char *verb, const char *resource);
/* Waits up to `ms` for `*counter` to reach `target`. */
int wait_for(atomic_int *counter, int target, long ms);
/* The lock on `resource`, or NULL (the caller's CHECK fails the test). */
fencelock_lock *take(fencelock_client *client, const char *resource, uint64_t ttl_ms);

/* ---- completion callbacks of *_async calls (support.c) ------------------ */

/* What on_acquired and on_done saw; with `client` set, on_acquired also makes blocking calls on it. */
typedef struct async_record {
  atomic_int calls;
  fencelock_status status;
  fencelock_lock *lock;
  char message[512]; /* the error's message, for a failing test to print */
  fencelock_status nested_blocking; /* what a blocking call made from the callback returned */
  fencelock_status nested_release;
  fencelock_status nested_next_event;
  fencelock_client *client;
  char resource[128];
} async_record;

void on_acquired(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error);
void on_done(void *user_data, fencelock_status status, fencelock_error *error);

/* ---- tests, by file (main.c runs them) ---------------------------------- */

/* test_client.c */
void test_version_matches_header(void);
void test_status_names(void);
void test_client_lifecycle_with_options(void);
void test_bad_client_arguments(void);
void test_tls_min_version_option(void);
void test_bad_lock_arguments(void);

/* test_lock.c */
void test_lock_options(void);
void test_fair_option(void);
void test_acquire_extend_release(void);
void test_contention_in_one_process(void);
void test_contention_across_processes(void);
void test_fencing_tokens_and_fenced_writes(void);
void test_free_while_renewing_lets_key_expire(void);
void test_release_after_client_free(void);
void test_redlock_quorum(void);
void test_inventory_example(void);

/* test_loss.c */
void test_loss_event_pulled(void);
void test_loss_event_callback(void);
void test_no_event_callback_after_client_free(void);
void test_lock_lost_callback(void);
void test_lock_free_waits_for_its_lost_callback(void);

/* test_async.c */
void test_async_acquire_and_release(void);
void test_async_fenced_set(void);
void test_async_cancel_fires_once_and_leaves_nothing(void);
void test_callback_may_free_the_request_holding_its_operation(void);
void test_async_reads_and_connect(void);
void test_async_reads_and_connect_cancelled_on_a_paused_node(void);

/* test_callbacks.c */
void test_blocking_calls_from_a_callback_work(void);
void test_slow_event_callback_does_not_stall_renewals(void);
void test_slow_completion_callback_does_not_stall_renewals(void);
void test_clearing_the_event_callback_waits_for_a_call_in_progress(void);
void test_client_free_waits_for_a_call_in_progress(void);
void test_a_callback_may_stop_itself_and_free_its_client(void);
void test_client_free_in_a_forked_child_does_not_wait_for_the_parents_call(void);

/* test_inspect.c */
void test_inspect_held_released_and_waiting(void);
void test_inspect_held_released_and_waiting_on_three_nodes(void);
void test_inspect_async(void);
void test_inspect_shows_a_node_that_does_not_answer(void);
void test_bad_inspect_arguments(void);

/* test_election.c */
void test_campaign_and_observe(void);
void test_campaign_and_observe_on_three_nodes(void);
void test_observation_calls_end_when_cancelled_or_freed(void);
void test_bad_campaign_arguments(void);

/* test_semaphore.c */
void test_semaphore_capacity_under_contention(void);
void test_semaphore_capacity_under_contention_on_three_nodes(void);
void test_semaphore_permits_and_holders(void);
void test_semaphore_permits_and_holders_on_three_nodes(void);
void test_semaphore_permits_must_agree(void);
void test_semaphore_async_acquire(void);
void test_semaphore_fair_option(void);
void test_semaphore_permit_lost(void);
void test_bad_semaphore_arguments(void);

/* test_rw_lock.c */
void test_rw_readers_share_and_a_writer_holds_alone(void);
void test_rw_readers_share_and_a_writer_holds_alone_on_three_nodes(void);
void test_rw_contention(void);
void test_rw_contention_on_three_nodes(void);
void test_rw_waiting_writer_is_not_overtaken_by_later_readers(void);
void test_rw_reader_lost_while_another_stays(void);
void test_rw_async_read_and_write(void);
void test_rw_fair_option(void);
void test_bad_rw_arguments(void);

/* test_metrics.c */
void test_metrics_follow_a_scripted_scenario(void);
void test_metrics_arguments_and_sizes(void);

/* test_log.c */
void test_log_records_reach_the_callback_at_its_level_without_secrets(void);
void test_log_levels_are_the_vectors(void);

/* test_vectors.c */
void test_protocol_vectors(void);

/* test_postgres.c (a PostgreSQL server, started by the first of them) */
void test_postgres_acquire_refuse_extend_release(void);
void test_postgres_waiter_is_served_after_the_release(void);
void test_postgres_stale_fenced_write_is_refused(void);
void test_postgres_deleted_lease_row_is_a_loss(void);
void test_postgres_beside_redis_is_a_config_error_without_the_password(void);
/* Frees the PostgreSQL clients and stops the server if a test started it,
   once the server saw the clients' sessions close; false (after saying so)
   when they were still open 10 s later. */
bool postgres_stop(void);

/* ---- helper processes: this program run again with arguments (main.c) --- */

/* test_lock.c: `hold URL RESOURCE MS`, for test_contention_across_processes. */
int hold(const char *url, const char *resource, long ms);
/* test_async.c: `race-operation-out URL`, for test_callback_may_free_the_request_holding_its_operation. */
int race_operation_out(const char *url);

#endif
