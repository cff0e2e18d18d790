/*
 * C tests of libfencelock against real redis-server nodes (started by the
 * shared harness). Prints one line per test and "N passed, N failed" (then
 * ", N skipped" if a test could not run here, e.g. without PostgreSQL);
 * FENCELOCK_C_TEST=TEXT runs only the tests whose name contains TEXT.
 *
 *   test_fencelock              run every test
 *   test_fencelock hold URL RESOURCE MS
 *                               helper process: take the lock, print its
 *                               token, hold it MS milliseconds, release
 *   test_fencelock race-operation-out URL
 *                               helper process: start operations whose
 *                               callback frees the struct holding their handle
 *
 * This file starts the nodes and runs the test table; the tests are in
 *   test_client.c     version, status names, options, TLS option, bad arguments
 *   test_lock.c       acquire/extend/release, lock options, contention, fencing, quorum, example
 *   test_loss.c       loss events (pulled, callback) and a lock's lost callback
 *   test_async.c      *_async calls (reads and connecting too), cancelling, *operation_out
 *   test_inspect.c    each node's view of a lock: free, held with a waiter, released, a node down, bad arguments
 *   test_callbacks.c  blocking and slow callbacks, stopping callbacks, fork
 *   test_election.c   campaigns, leaderships, observations
 *   test_semaphore.c  semaphores: capacity, permits, holders, size mismatch, callbacks, loss
 *   test_rw_lock.c    read-write locks: sharing, exclusion under contention, writer queueing, loss, callbacks
 *   test_metrics.c    a client's metrics: a scripted scenario, the snapshot's size and NULLs
 *   test_log.c        the core's log records through a log callback: levels, no secrets
 *   test_vectors.c    the shared protocol vectors and tables
 *   test_postgres.c   the lock, waiting, fenced writes, loss and configuration on a PostgreSQL server
 * and what they share in support.h / support.c; harness.h runs the nodes.
 */
#define _GNU_SOURCE
#include "support.h"

#include <stdlib.h>
#include <string.h>

redis_nodes single;
redis_nodes trio;
const char *self_path;
int test_failed;
int test_skipped;
char skip_reason[1024];

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
      TEST(test_lock_options),
      TEST(test_fair_option),
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
      TEST(test_async_reads_and_connect),
      TEST(test_async_reads_and_connect_cancelled_on_a_paused_node),
      TEST(test_bad_client_arguments),
      TEST(test_tls_min_version_option),
      TEST(test_bad_lock_arguments),
      TEST(test_inventory_example),
      TEST(test_inspect_held_released_and_waiting),
      TEST(test_inspect_held_released_and_waiting_on_three_nodes),
      TEST(test_inspect_async),
      TEST(test_inspect_shows_a_node_that_does_not_answer),
      TEST(test_bad_inspect_arguments),
      TEST(test_campaign_and_observe),
      TEST(test_campaign_and_observe_on_three_nodes),
      TEST(test_observation_calls_end_when_cancelled_or_freed),
      TEST(test_bad_campaign_arguments),
      TEST(test_semaphore_capacity_under_contention),
      TEST(test_semaphore_capacity_under_contention_on_three_nodes),
      TEST(test_semaphore_permits_and_holders),
      TEST(test_semaphore_permits_and_holders_on_three_nodes),
      TEST(test_semaphore_permits_must_agree),
      TEST(test_semaphore_async_acquire),
      TEST(test_semaphore_fair_option),
      TEST(test_semaphore_permit_lost),
      TEST(test_bad_semaphore_arguments),
      TEST(test_rw_readers_share_and_a_writer_holds_alone),
      TEST(test_rw_readers_share_and_a_writer_holds_alone_on_three_nodes),
      TEST(test_rw_contention),
      TEST(test_rw_contention_on_three_nodes),
      TEST(test_rw_waiting_writer_is_not_overtaken_by_later_readers),
      TEST(test_rw_reader_lost_while_another_stays),
      TEST(test_rw_async_read_and_write),
      TEST(test_rw_fair_option),
      TEST(test_bad_rw_arguments),
      TEST(test_metrics_follow_a_scripted_scenario),
      TEST(test_metrics_arguments_and_sizes),
      TEST(test_log_records_reach_the_callback_at_its_level_without_secrets),
      TEST(test_log_levels_are_the_vectors),
      TEST(test_protocol_vectors),
      TEST(test_redlock_quorum),
      TEST(test_postgres_acquire_refuse_extend_release),
      TEST(test_postgres_waiter_is_served_after_the_release),
      TEST(test_postgres_stale_fenced_write_is_refused),
      TEST(test_postgres_deleted_lease_row_is_a_loss),
      TEST(test_postgres_beside_redis_is_a_config_error_without_the_password),
  };
  if (redis_nodes_start(&single, 1) != 0 || redis_nodes_start(&trio, 3) != 0) {
    fprintf(stderr, "could not start redis nodes through the harness\n");
    return 2;
  }
  const char *only = getenv("FENCELOCK_C_TEST");
  int passed = 0, failed = 0, skipped = 0;
  for (size_t i = 0; i < sizeof tests / sizeof tests[0]; i++) {
    if (only != NULL && strstr(tests[i].name, only) == NULL) continue;
    test_failed = 0;
    test_skipped = 0;
    tests[i].run();
    if (test_skipped && !test_failed) {
      printf("skip %s: %s\n", tests[i].name, skip_reason);
      fflush(stdout);
      skipped++;
      continue;
    }
    printf("%s %s\n", test_failed ? "FAIL" : "ok  ", tests[i].name);
    fflush(stdout);
    if (test_failed) failed++;
    else passed++;
  }
  if (!postgres_stop()) failed++;
  /* Background clean-up (releases on their way, a node reconnecting) would
     otherwise die with the process. */
  if (fencelock_settle(10000) != FENCELOCK_STATUS_OK) {
    fprintf(stderr, "FAIL fencelock_settle: background clean-up still running after 10 s\n");
    failed++;
  }
  redis_nodes_stop(&single);
  redis_nodes_stop(&trio);
  free((void *)self_path);
  if (skipped > 0) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  else printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
