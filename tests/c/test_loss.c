/*
 * Losing a lock: loss events pulled from the client's queue or delivered to
 * its event callback (never after the client is freed), a lock's own lost
 * callback, and fencelock_lock_free waiting for that callback.
 */
#define _GNU_SOURCE
#include "support.h"

#include <string.h>

void test_loss_event_pulled(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_event event;
  memset(&event, 0, sizeof event);
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);

  const char *resource = unique("lost");
  fencelock_lock *lock = NULL;
  /* A 1 s lease: a renewal finds the key gone (DELETED) rather than running
     late past the lease under valgrind (which would report UNREACHABLE). */
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(strcmp(on_lock_key(&single, "DEL", resource), "1") == 0);

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

void test_loss_event_callback(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static loss_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event, &record), FENCELOCK_STATUS_OK);
  const char *resource = unique("lost-cb");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  on_lock_key(&single, "DEL", resource);
  CHECK(wait_for(&record.calls, 1, 10000));
  sleep_ms(700); /* a second call would show up within two renewal periods */
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

void test_no_event_callback_after_client_free(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static loss_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_client_set_event_callback(client, on_event, &record), FENCELOCK_STATUS_OK);
  const char *resource = unique("after-free");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 300, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_client_free(client);
  on_lock_key(&single, "DEL", resource);
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

static void delete_key(const char *resource) {
  CHECK(strcmp(on_lock_key(&single, "DEL", resource), "1") == 0);
}

void test_lock_lost_callback(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  static lost_record record, late, released;
  memset(&record, 0, sizeof record);
  memset(&late, 0, sizeof late);
  memset(&released, 0, sizeof released);
  const char *resource = unique("lock-lost-cb");
  fencelock_lock *lock = take(client, resource, 1000);
  CHECK(lock != NULL);
  CHECK_STATUS(fencelock_lock_on_lost(NULL, on_lock_lost, &record, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_on_lost(lock, on_lock_lost, &record, NULL), FENCELOCK_STATUS_OK);
  delete_key(resource);
  CHECK(wait_for(&record.calls, 1, 10000));
  sleep_ms(700); /* a second call would show up within two renewal periods */
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

void test_lock_free_waits_for_its_lost_callback(void) {
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
