/*
 * Leader election: campaigns (blocking and callback), the leadership as a
 * lock (epoch = fencing token, release resigns, loss reported), observers
 * following each new leader by push (blocking and callback), on one node and
 * on three, and bad arguments.
 */
#define _GNU_SOURCE
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* Waits up to `ms` until every node of `nodes` has one subscriber on `name`'s channel. */
static bool observed_everywhere(redis_nodes *nodes, const char *name, long ms) {
  char command[256];
  snprintf(command, sizeof command, "PUBSUB NUMSUB fencelock:leader:%s", name);
  for (long waited = 0; waited < ms; waited += 20) {
    int subscribed = 0;
    for (int i = 0; i < nodes->count; i++) {
      const char *reply = redis(nodes, i, command);
      size_t length = strlen(reply);
      subscribed += length >= 2 && strcmp(reply + length - 2, " 1") == 0;
    }
    if (subscribed == nodes->count) return true;
    sleep_ms(20);
  }
  return false;
}

/* The leader of an observation's next item within `ms`; epoch 0 when none came. */
static uint64_t next_epoch(fencelock_observation *observation, long ms, char *value, size_t value_size) {
  fencelock_leader leader = {0};
  if (fencelock_observation_next(observation, (uint64_t)ms, &leader, NULL) != FENCELOCK_STATUS_OK) return 0;
  snprintf(value, value_size, "%s", (const char *)leader.value);
  uint64_t epoch = leader.epoch;
  fencelock_leader_clear(&leader);
  return epoch;
}

typedef struct leader_record {
  atomic_int calls;
  fencelock_status status;
  uint64_t epoch;
  size_t value_len;
  char value[64];
} leader_record;

static void on_leader(void *user_data, fencelock_status status, const fencelock_leader *leader,
                      fencelock_error *error) {
  leader_record *record = user_data;
  record->status = status;
  if (leader != NULL) {
    record->epoch = leader->epoch;
    record->value_len = leader->value_len;
    snprintf(record->value, sizeof record->value, "%s", (const char *)leader->value);
  }
  fencelock_error_free(error);
  atomic_fetch_add(&record->calls, 1);
}

static void campaign_and_follow(redis_nodes *nodes) {
  fencelock_client *first = connect_to(nodes), *second = connect_to(nodes), *watcher = connect_to(nodes);
  CHECK(first != NULL && second != NULL && watcher != NULL);
  const char *name = unique("leader");
  fencelock_observation *observation = NULL;
  CHECK_STATUS(fencelock_observe(watcher, name, &observation, NULL), FENCELOCK_STATUS_OK);
  CHECK(observed_everywhere(nodes, name, 5000));
  fencelock_leader none = {0};
  CHECK_STATUS(fencelock_observation_next(observation, 0, &none, NULL), FENCELOCK_STATUS_TIMEOUT);

  fencelock_lock *leadership = NULL;
  CHECK_STATUS(fencelock_campaign(first, name, 5000, 0, (const uint8_t *)"host-a:1", 8, &leadership, NULL),
               FENCELOCK_STATUS_OK);
  uint64_t epoch = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(leadership, &epoch), FENCELOCK_STATUS_OK);
  CHECK(epoch > 0 && strcmp(fencelock_lock_resource(leadership), name) == 0);
  /* Within a second: by push (an observer's own read comes every 2 s). */
  fencelock_leader seen = {0};
  CHECK_STATUS(fencelock_observation_next(observation, 1000, &seen, NULL), FENCELOCK_STATUS_OK);
  CHECK(seen.epoch == epoch && seen.value_len == 8 && memcmp(seen.value, "host-a:1", 9) == 0);
  fencelock_leader_clear(&seen);
  CHECK(seen.value == NULL && seen.value_len == 0);
  fencelock_leader_clear(&seen); /* twice: nothing left to free */

  /* One attempt while another leads: NOT_ACQUIRED. A waiting candidate wins when the leader resigns. */
  fencelock_lock *refused = NULL;
  CHECK_STATUS(fencelock_campaign(second, name, 5000, 0, NULL, 0, &refused, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  static async_record won;
  memset(&won, 0, sizeof won);
  CHECK_STATUS(fencelock_campaign_async(second, name, 5000, FENCELOCK_MAX_WAIT_MS, (const uint8_t *)"host-b:2", 8,
                                        on_acquired, &won, NULL, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&won.calls) == 0); /* still waiting in line */
  CHECK_STATUS(fencelock_lock_release(leadership, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&won.calls, 1, 10000));
  CHECK(won.status == FENCELOCK_STATUS_OK && won.lock != NULL);
  uint64_t next = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(won.lock, &next), FENCELOCK_STATUS_OK);
  CHECK(next > epoch);

  static leader_record pushed;
  memset(&pushed, 0, sizeof pushed);
  CHECK_STATUS(fencelock_observation_next_async(observation, on_leader, &pushed, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&pushed.calls, 1, 1000));
  CHECK(pushed.status == FENCELOCK_STATUS_OK && pushed.epoch == next);
  CHECK(pushed.value_len == 8 && strcmp(pushed.value, "host-b:2") == 0);

  if (nodes->count == 1) { /* (on three nodes, one deleted key leaves a majority: nothing is lost) */
    /* Leadership is lost as a lock is: its key deleted behind its back. */
    CHECK(strcmp(on_lock_key(nodes, "DEL", name), "1") == 0);
    fencelock_event event;
    CHECK_STATUS(fencelock_client_next_event(second, 4000, &event), FENCELOCK_STATUS_OK);
    CHECK(event.kind == FENCELOCK_EVENT_LOCK_LOST && event.fencing_token == next);
    CHECK(strcmp(event.resource, name) == 0);
    fencelock_event_clear(&event);
    bool leads = true;
    CHECK_STATUS(fencelock_lock_is_held(won.lock, &leads), FENCELOCK_STATUS_OK);
    CHECK(!leads);
  }
  fencelock_lock_free(won.lock);
  fencelock_lock_free(leadership);
  fencelock_observation_free(observation);
  fencelock_client_free(first);
  fencelock_client_free(second);
  fencelock_client_free(watcher);
}

void test_campaign_and_observe(void) { campaign_and_follow(&single); }

void test_campaign_and_observe_on_three_nodes(void) { campaign_and_follow(&trio); }

void test_observation_calls_end_when_cancelled_or_freed(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("quiet");
  fencelock_observation *observation = NULL;
  CHECK_STATUS(fencelock_observe(client, name, &observation, NULL), FENCELOCK_STATUS_OK);
  char value[16];
  CHECK(next_epoch(observation, 100, value, sizeof value) == 0); /* nobody leads: TIMEOUT */

  static leader_record cancelled, freed;
  memset(&cancelled, 0, sizeof cancelled);
  memset(&freed, 0, sizeof freed);
  fencelock_operation *operation = NULL;
  CHECK_STATUS(fencelock_observation_next_async(observation, on_leader, &cancelled, &operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_operation_cancel(operation), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&cancelled.calls, 1, 10000));
  CHECK(cancelled.status == FENCELOCK_STATUS_CANCELLED && cancelled.epoch == 0);
  fencelock_operation_free(operation);

  CHECK_STATUS(fencelock_observation_next_async(observation, on_leader, &freed, NULL, NULL), FENCELOCK_STATUS_OK);
  fencelock_observation_free(observation);
  CHECK(wait_for(&freed.calls, 1, 10000));
  CHECK(freed.status == FENCELOCK_STATUS_CANCELLED);
  sleep_ms(100);
  CHECK(atomic_load(&freed.calls) == 1 && atomic_load(&cancelled.calls) == 1); /* exactly once */
  char command[256];
  snprintf(command, sizeof command, "PUBSUB NUMSUB fencelock:leader:%s", name);
  bool unsubscribed = false;
  for (int waited = 0; waited < 2000 && !unsubscribed; waited += 20) {
    const char *reply = redis(&single, 0, command);
    size_t length = strlen(reply);
    unsubscribed = length >= 2 && strcmp(reply + length - 2, " 0") == 0;
    if (!unsubscribed) sleep_ms(20);
  }
  CHECK(unsubscribed); /* freeing ended the subscription */
  /* An observation outlives its client, ended: CLOSED at once, not a wait. */
  CHECK_STATUS(fencelock_observe(client, name, &observation, NULL), FENCELOCK_STATUS_OK);
  fencelock_client_free(client);
  fencelock_leader ended = {0};
  CHECK_STATUS(fencelock_observation_next(observation, 2000, &ended, NULL), FENCELOCK_STATUS_CLOSED);
  fencelock_observation_free(observation);
}

void test_bad_campaign_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("bad-campaign");
  fencelock_lock *lock = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  size_t too_long = FENCELOCK_MAX_LEADER_VALUE_BYTES + 1;
  CHECK(fencelock_get_limits()->max_leader_value_bytes == FENCELOCK_MAX_LEADER_VALUE_BYTES);
  uint8_t *big = calloc(too_long, 1);
  CHECK(big != NULL);
  fencelock_status status = fencelock_campaign(client, name, 1000, 0, big, too_long, &lock, &error);
  static async_record never;
  memset(&never, 0, sizeof never);
  fencelock_status async_status =
      fencelock_campaign_async(client, name, 1000, 0, big, too_long, on_acquired, &never, NULL, NULL);
  free(big);
  CHECK(status == FENCELOCK_STATUS_INVALID_ARGUMENT && async_status == FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "65536") != NULL);
  fencelock_error_free(error);
  CHECK(lock == (fencelock_lock *)0x1); /* untouched on failure */

  CHECK_STATUS(fencelock_campaign(client, name, 1000, 0, NULL, 3, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_campaign(client, NULL, 1000, 0, NULL, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_campaign(client, name, 0, 0, NULL, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_campaign(client, "", 1000, 0, NULL, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_campaign(client, "\xff", 1000, 0, NULL, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_campaign(client, name, 1000, 0, NULL, 0, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_campaign_async(client, name, 0, 0, NULL, 0, on_acquired, &never, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_campaign_async(client, name, 1000, 0, NULL, 0, NULL, NULL, NULL, NULL),
               FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_campaign_async(client, name, 1000, FENCELOCK_MAX_WAIT_MS + 1, NULL, 0, on_acquired, &never,
                                        NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  sleep_ms(100);
  CHECK(atomic_load(&never.calls) == 0); /* a refused start never calls back */

  fencelock_observation *observation = (fencelock_observation *)0x1;
  CHECK_STATUS(fencelock_observe(client, "", &observation, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_observe(NULL, name, &observation, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(observation == (fencelock_observation *)0x1);
  CHECK_STATUS(fencelock_observation_next(NULL, 0, &(fencelock_leader){0}, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_observe(client, name, &observation, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_observation_next(observation, 0, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_observation_next_async(observation, NULL, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  fencelock_observation_free(observation);
  fencelock_observation_free(NULL);
  fencelock_leader_clear(NULL);

  /* An empty value is fine; an observer reads it as an empty string. */
  CHECK_STATUS(fencelock_campaign(client, name, 1000, 0, NULL, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_observe(client, name, &observation, NULL), FENCELOCK_STATUS_OK);
  char value[16] = "x";
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(next_epoch(observation, 3000, value, sizeof value) == token && value[0] == '\0');
  fencelock_observation_free(observation);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}
