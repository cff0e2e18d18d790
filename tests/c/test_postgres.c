/*
 * PostgreSQL as a node (docs/postgres-store.md): the same lock, tokens,
 * waiting, fenced writes and loss over a real PostgreSQL server from
 * `redis-nodes --postgres`, started by the first of these tests and stopped
 * by main.c (postgres_stop). Each test is skipped, saying why, when that
 * server cannot start (PostgreSQL not installed).
 *
 * The tests share two clients of the server: connecting to PostgreSQL
 * (SCRAM's key stretching in a debug build) takes seconds under valgrind.
 */
#define _GNU_SOURCE
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static redis_nodes pg;
static int pg_state; /* 0: not tried, 1: running, -1: cannot start (pg_why says why) */
static char pg_why[960];
static fencelock_client *holder, *other; /* two clients of the server */

/* A client of the server: the generous node timeout, and a connect timeout for valgrind. */
static fencelock_client *connect_pg(redis_nodes *server) {
  fencelock_client *client = NULL;
  fencelock_options *options = NULL;
  fencelock_error *error = NULL;
  if (fencelock_options_new(&options) != FENCELOCK_STATUS_OK) return NULL;
  fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS);
  fencelock_options_set_connect_timeout_ms(options, 30000);
  fencelock_status status = fencelock_client_new(server->url_list, 1, options, &client, &error);
  fencelock_options_free(options);
  if (status != FENCELOCK_STATUS_OK) {
    fprintf(stderr, "    connect failed: %s\n", fencelock_error_message(error));
    fencelock_error_free(error);
    return NULL;
  }
  return client;
}

/* The server and its clients, started on first use; NULL (with pg_why) when
 * it cannot start, and pg_missing when that is because PostgreSQL is not installed. */
static bool pg_missing;
static redis_nodes *postgres(void) {
  if (pg_state == 0) {
    int started = redis_nodes_start_postgres(&pg, pg_why, sizeof pg_why);
    pg_missing = started == 1;
    pg_state = started == 0 ? 1 : -1;
    if (pg_state == 1) {
      holder = connect_pg(&pg);
      other = connect_pg(&pg);
    }
  }
  return pg_state == 1 ? &pg : NULL;
}

#define NEED_POSTGRES(server)                                                  \
  redis_nodes *server = postgres();                                            \
  if (server == NULL && pg_missing) SKIP("no PostgreSQL server: %s", pg_why); \
  if (server == NULL) {                                                        \
    fprintf(stderr, "    %s\n", pg_why);                                       \
    CHECK(server != NULL);                                                     \
  }                                                                            \
  CHECK(holder != NULL && other != NULL)

/* Runs one SQL statement on the server as the superuser; returns what it printed. */
static const char *sql(redis_nodes *server, const char *statement) {
  static char reply[4096];
  if (redis_nodes_run(server, reply, sizeof reply, "sql %s", statement) != 0) {
    fprintf(stderr, "    harness: sql %s: %s\n", statement, reply);
  }
  return reply;
}

bool postgres_stop(void) {
  fencelock_client_free(holder);
  fencelock_client_free(other);
  holder = other = NULL;
  bool closed = true;
  if (pg_state == 1) {
    /* A freed client closes its sessions in the background (fencelock_client_free
       does no I/O). Wait until the server has seen every one go: what a teardown
       still running at exit holds, valgrind reports as possibly lost. */
    const char *count = "SELECT count(*) FROM pg_stat_activity "
                        "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const time_t deadline = now.tv_sec + 10;
    closed = strcmp(sql(&pg, count), "0") == 0;
    while (!closed && now.tv_sec < deadline) {
      sleep_ms(20);
      closed = strcmp(sql(&pg, count), "0") == 0;
      clock_gettime(CLOCK_MONOTONIC, &now);
    }
    if (!closed) fprintf(stderr, "FAIL postgres_stop: the freed clients' sessions were still open after 10 s\n");
    redis_nodes_stop(&pg);
  }
  pg_state = 0;
  return closed;
}

/* `SELECT what FROM fencelock.keys WHERE key = <the lock key of resource>` (resource has no quote). */
static const char *on_lease_row(redis_nodes *server, const char *what, const char *resource) {
  char statement[512];
  snprintf(statement, sizeof statement, "SELECT %s FROM fencelock.keys WHERE key = 'fencelock:{%s}'", what,
           resource);
  return sql(server, statement);
}

void test_postgres_acquire_refuse_extend_release(void) {
  NEED_POSTGRES(server);
  const char *resource = unique("pg-basic");
  fencelock_lock *lock = NULL, *refused = NULL;
  CHECK_STATUS(fencelock_acquire(holder, resource, 5000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
  CHECK(token > 0);
  CHECK(strcmp(on_lease_row(server, "count(*)", resource), "1") == 0);

  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_try_acquire(other, resource, 5000, &refused, &error), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(refused == NULL);
  CHECK(fencelock_error_node_count(error) == 1);
  fencelock_node_outcome outcome = FENCELOCK_NODE_OK;
  CHECK_STATUS(fencelock_error_node(error, 0, NULL, &outcome, NULL), FENCELOCK_STATUS_OK);
  CHECK(outcome == FENCELOCK_NODE_HELD_BY_OTHER);
  fencelock_error_free(error);

  CHECK_STATUS(fencelock_lock_extend(lock, 8000, NULL), FENCELOCK_STATUS_OK);
  long ms = atol(on_lease_row(server, "(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int", resource));
  if (!(ms > 5000 && ms <= 8000)) fprintf(stderr, "    the lease row expires in %ld ms\n", ms);
  CHECK(ms > 5000 && ms <= 8000); /* the lease row's expiry follows extend */
  uint64_t remaining = 0;
  CHECK_STATUS(fencelock_lock_remaining_ms(lock, &remaining), FENCELOCK_STATUS_OK);
  CHECK(remaining > 5000 && remaining <= 8000);

  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  bool held = true;
  CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  CHECK(strcmp(on_lease_row(server, "count(*)", resource), "0") == 0);
  fencelock_lock *again = NULL;
  CHECK_STATUS(fencelock_acquire(other, resource, 5000, 0, &again, NULL), FENCELOCK_STATUS_OK);
  uint64_t next = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(again, &next), FENCELOCK_STATUS_OK);
  CHECK(next > token);
  CHECK_STATUS(fencelock_lock_release(again, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(again);
  fencelock_lock_free(lock);
}

void test_postgres_waiter_is_served_after_the_release(void) {
  NEED_POSTGRES(server);
  (void)server;
  const char *resource = unique("pg-wait");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(holder, resource, 10000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);

  static async_record record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_acquire_async(other, resource, 5000, 8000, on_acquired, &record, NULL, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(500);
  CHECK(atomic_load(&record.calls) == 0); /* it waits while the lock is held */
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&record.calls, 1, 5000));
  if (record.status != FENCELOCK_STATUS_OK) fprintf(stderr, "    status %d: %s\n", record.status, record.message);
  CHECK(record.status == FENCELOCK_STATUS_OK && record.lock != NULL);
  uint64_t next = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(record.lock, &next), FENCELOCK_STATUS_OK);
  CHECK(next > token);
  CHECK_STATUS(fencelock_lock_release(record.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(record.lock);
  fencelock_lock_free(lock);
}

void test_postgres_stale_fenced_write_is_refused(void) {
  NEED_POSTGRES(server);
  (void)server;
  fencelock_client *client = holder;
  const char *resource = unique("pg-fence");
  fencelock_lock *first = NULL, *second = NULL;
  fencelock_fence old = {0, 0}, current = {0, 0};
  CHECK_STATUS(fencelock_acquire(client, resource, 5000, 0, &first, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_fence(first, &old), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(first, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire(client, resource, 5000, 0, &second, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_fence(second, &current), FENCELOCK_STATUS_OK);
  CHECK(current.token > old.token);

  const char *key = unique("pg-fenced-key");
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "new", current, NULL), FENCELOCK_STATUS_OK);
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "old", old, &error), FENCELOCK_STATUS_STALE_TOKEN);
  CHECK(error != NULL && fencelock_error_status(error) == FENCELOCK_STATUS_STALE_TOKEN);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_fenced_set(client, key, "bare old token", old.token, NULL), FENCELOCK_STATUS_STALE_TOKEN);

  char *value = NULL;
  uint64_t stored = 0;
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "new") == 0);
  CHECK(stored == current.token);
  fencelock_string_free(value);
  CHECK_STATUS(fencelock_fenced_set_fence(client, key, "newer", current, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_fenced_get(client, key, &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value != NULL && strcmp(value, "newer") == 0);
  fencelock_string_free(value);
  CHECK_STATUS(fencelock_fenced_get(client, unique("pg-absent"), &value, &stored, NULL), FENCELOCK_STATUS_OK);
  CHECK(value == NULL && stored == 0);

  CHECK_STATUS(fencelock_lock_release(second, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(second);
  fencelock_lock_free(first);
}

typedef struct pg_loss {
  atomic_int calls;
  fencelock_loss_reason reason;
} pg_loss;

static void on_pg_lost(void *user_data, fencelock_loss_reason reason) {
  pg_loss *loss = user_data;
  loss->reason = reason;
  atomic_fetch_add(&loss->calls, 1);
}

/* Two locks of 1 s whose lease rows are deleted: one reports through its
   lost callback, the other through the client's event queue. */
void test_postgres_deleted_lease_row_is_a_loss(void) {
  NEED_POSTGRES(server);
  fencelock_client *client = other;
  fencelock_event event;
  memset(&event, 0, sizeof event);
  while (fencelock_client_next_event(client, 0, &event) == FENCELOCK_STATUS_OK) {
    fencelock_event_clear(&event); /* left by an earlier test that failed */
  }
  const char *with_callback = unique("pg-lost-cb");
  const char *queued = unique("pg-lost-queued");
  fencelock_lock *a = NULL, *b = NULL;
  CHECK_STATUS(fencelock_acquire(client, with_callback, 1000, 0, &a, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_acquire(client, queued, 1000, 0, &b, NULL), FENCELOCK_STATUS_OK);
  static pg_loss loss;
  memset(&loss, 0, sizeof loss);
  CHECK_STATUS(fencelock_lock_on_lost(a, on_pg_lost, &loss, NULL), FENCELOCK_STATUS_OK);
  uint64_t token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(b, &token), FENCELOCK_STATUS_OK);

  char key[256], statement[512];
  snprintf(key, sizeof key, "fencelock:{%s}", with_callback);
  snprintf(statement, sizeof statement, "DELETE FROM fencelock.keys WHERE key = '%s' RETURNING key", key);
  CHECK(strcmp(sql(server, statement), key) == 0);
  snprintf(key, sizeof key, "fencelock:{%s}", queued);
  snprintf(statement, sizeof statement, "DELETE FROM fencelock.keys WHERE key = '%s' RETURNING key", key);
  CHECK(strcmp(sql(server, statement), key) == 0);

  CHECK(wait_for(&loss.calls, 1, 5000));
  CHECK(loss.reason == FENCELOCK_LOSS_DELETED);
  CHECK_STATUS(fencelock_client_next_event(client, 5000, &event), FENCELOCK_STATUS_OK);
  CHECK(event.kind == FENCELOCK_EVENT_LOCK_LOST);
  CHECK(event.reason == FENCELOCK_LOSS_DELETED);
  CHECK(event.fencing_token == token);
  CHECK(strcmp(event.resource, queued) == 0);
  fencelock_event_clear(&event);
  /* The loss with a callback went to the callback only. */
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT);

  bool held = true;
  CHECK_STATUS(fencelock_lock_is_held(a, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  CHECK_STATUS(fencelock_lock_extend(b, 1000, NULL), FENCELOCK_STATUS_LOST);
  CHECK(atomic_load(&loss.calls) == 1);
  fencelock_lock_free(a);
  fencelock_lock_free(b);
}

/* The password of a postgresql://user:password@host… URL, copied into `out`. */
static void password_of(const char *url, char *out, size_t size) {
  const char *user = strstr(url, "://");
  const char *colon = user == NULL ? NULL : strchr(user + 3, ':');
  const char *at = colon == NULL ? NULL : strchr(colon, '@');
  out[0] = '\0';
  if (at != NULL && (size_t)(at - colon - 1) < size) snprintf(out, size, "%.*s", (int)(at - colon - 1), colon + 1);
}

void test_postgres_beside_redis_is_a_config_error_without_the_password(void) {
  NEED_POSTGRES(server);
  char password[128];
  password_of(server->urls[0], password, sizeof password);
  CHECK(password[0] != '\0');
  const char *mixed[2][2] = {{server->urls[0], "redis://127.0.0.1:1"}, {"redis://127.0.0.1:1", server->urls[0]}};
  for (int i = 0; i < 2; i++) {
    fencelock_client *client = (fencelock_client *)0x1;
    fencelock_error *error = NULL;
    CHECK_STATUS(fencelock_client_new(mixed[i], 2, NULL, &client, &error), FENCELOCK_STATUS_CONFIG);
    CHECK(client == (fencelock_client *)0x1); /* out-parameter untouched on failure */
    CHECK(error != NULL && fencelock_error_status(error) == FENCELOCK_STATUS_CONFIG);
    const char *message = fencelock_error_message(error);
    if (strstr(message, password) != NULL) fprintf(stderr, "    the password is in: %s\n", message);
    CHECK(strstr(message, "PostgreSQL") != NULL);
    CHECK(strstr(message, password) == NULL);
    fencelock_error_free(error);
  }

  /* A working client names the node without it too. */
  fencelock_client *client = holder;
  const char *resource = unique("pg-secret");
  fencelock_lock *lock = NULL, *refused = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 5000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 5000, 0, &refused, &error), FENCELOCK_STATUS_NOT_ACQUIRED);
  const char *node = NULL, *detail = NULL;
  CHECK_STATUS(fencelock_error_node(error, 0, &node, NULL, &detail), FENCELOCK_STATUS_OK);
  CHECK(strstr(node, "127.0.0.1") != NULL);
  CHECK(strstr(node, password) == NULL && strstr(detail, password) == NULL);
  CHECK(strstr(fencelock_error_message(error), password) == NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
}
