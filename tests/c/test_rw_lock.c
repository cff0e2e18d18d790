/*
 * Read-write locks: read and write grants handed out as fencelock_locks,
 * readers sharing and a writer alone (one node and three), contention from
 * several threads mixing reads and writes (no writer beside anyone, writer
 * tokens above every earlier grant's), a waiting writer not overtaken by
 * later readers, a reader's loss while another reader stays, the callback
 * variants (woken, cancelled, fair), and bad arguments.
 */
#define _GNU_SOURCE
#include "support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* Runs `verb` (DEL, EXISTS, SCARD, ZCARD, PTTL…) on key `fencelock:{name}:rw:<suffix>` of node `index`. */
static const char *on_rw_key(redis_nodes *nodes, int index, const char *verb, const char *name, const char *suffix) {
  char command[256];
  snprintf(command, sizeof command, "%s fencelock:{%s}:rw:%s", verb, name, suffix);
  return redis(nodes, index, command);
}

/* On how many nodes of `nodes` `verb` on the key with `suffix` answers `reply`. */
static int nodes_answering(redis_nodes *nodes, const char *verb, const char *name, const char *suffix,
                           const char *reply) {
  int count = 0;
  for (int i = 0; i < nodes->count; i++) count += strcmp(on_rw_key(nodes, i, verb, name, suffix), reply) == 0;
  return count;
}

/* The fencing token of `lock`, 0 when it has none (never for a held grant). */
static uint64_t token_of(const fencelock_lock *lock) {
  uint64_t token = 0;
  return fencelock_lock_fencing_token(lock, &token) == FENCELOCK_STATUS_OK ? token : 0;
}

/* Waits up to `ms` until `fencelock:{name}:rw:writers` on node 0 of `nodes` has `count` members. */
static bool writers_waiting(redis_nodes *nodes, const char *name, int count, long ms) {
  char expected[16];
  snprintf(expected, sizeof expected, "%d", count);
  for (long waited = 0; waited < ms; waited += 20) {
    if (strcmp(on_rw_key(nodes, 0, "ZCARD", name, "writers"), expected) == 0) return true;
    sleep_ms(20);
  }
  return false;
}

/* Whether `key` is a reader key of `name`: fencelock:{name}:rw:read:<32 lowercase hex>. */
static bool is_reader_key(const char *key, const char *name) {
  char prefix[256];
  snprintf(prefix, sizeof prefix, "fencelock:{%s}:rw:read:", name);
  size_t length = strlen(prefix);
  if (strncmp(key, prefix, length) != 0 || strlen(key + length) != 32) return false;
  return strspn(key + length, "0123456789abcdef") == 32;
}

/* ---- readers share, a writer holds alone ----------------------------------- */

static void readers_share_and_a_writer_holds_alone(redis_nodes *nodes) {
  fencelock_client *client = connect_to(nodes);
  CHECK(client != NULL);
  const char *name = unique(nodes->count == 1 ? "rw-share" : "rw-share3");
  int majority = nodes->count / 2 + 1;

  fencelock_lock *first = NULL, *second = NULL;
  CHECK_STATUS(fencelock_rw_read(client, name, 5000, 0, &first, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_try_read(client, name, 5000, &second, NULL), FENCELOCK_STATUS_OK); /* readers share */
  CHECK(strcmp(fencelock_lock_resource(first), name) == 0 && strcmp(fencelock_lock_resource(second), name) == 0);
  CHECK(!fencelock_lock_permit(first, NULL)); /* a grant, not a semaphore's permit */
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(second, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  /* Each reader its own key, listed in the readers set; no write key. */
  CHECK(nodes_answering(nodes, "SCARD", name, "readers", "2") >= majority);
  CHECK(nodes_answering(nodes, "EXISTS", name, "write", "0") == nodes->count);
  char members[1024];
  snprintf(members, sizeof members, "%s", on_rw_key(nodes, 0, "SMEMBERS", name, "readers"));
  char *rest = NULL;
  int keys = 0;
  for (char *key = strtok_r(members, " ", &rest); key != NULL; key = strtok_r(NULL, " ", &rest), keys++) {
    CHECK(is_reader_key(key, name));
    char command[256];
    snprintf(command, sizeof command, "PTTL %s", key);
    long left = atol(redis(nodes, 0, command));
    CHECK(left > 0 && left <= 5000); /* the reader's own lease */
  }
  CHECK(keys == 2);

  /* A writer is refused beside readers: NOT_ACQUIRED, or TIMEOUT with a wait; nothing written on failure. */
  fencelock_lock *refused = (fencelock_lock *)0x1;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_rw_try_write(client, name, 5000, &refused, &error), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_NOT_ACQUIRED);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_rw_write(client, name, 5000, 150, &refused, NULL), FENCELOCK_STATUS_TIMEOUT);
  /* The timed-out writer has left every queue when the call returns: a release
     made next is not handed to it. */
  CHECK(nodes_answering(nodes, "ZCARD", name, "queue", "0") == nodes->count);
  CHECK_STATUS(fencelock_lock_release(first, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(first, NULL), FENCELOCK_STATUS_NOT_HELD);
  CHECK_STATUS(fencelock_rw_try_write(client, name, 5000, &refused, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(refused == (fencelock_lock *)0x1); /* one reader left is enough to keep it out */
  CHECK_STATUS(fencelock_lock_release(second, NULL), FENCELOCK_STATUS_OK);
  CHECK(nodes_answering(nodes, "SCARD", name, "readers", "0") >= majority);

  /* Alone: the writer's key, a token above both readers', and nobody beside it. */
  fencelock_lock *writer = NULL;
  CHECK_STATUS(fencelock_rw_write(client, name, 5000, 0, &writer, NULL), FENCELOCK_STATUS_OK);
  CHECK(strcmp(fencelock_lock_resource(writer), name) == 0);
  uint64_t written = token_of(writer);
  CHECK(written > token_of(first) && written > token_of(second));
  CHECK(nodes_answering(nodes, "EXISTS", name, "write", "1") >= majority);
  CHECK_STATUS(fencelock_rw_try_read(client, name, 5000, &refused, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(fencelock_rw_read(client, name, 5000, 150, &refused, NULL), FENCELOCK_STATUS_TIMEOUT);
  CHECK_STATUS(fencelock_rw_try_write(client, name, 5000, &refused, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(refused == (fencelock_lock *)0x1);
  CHECK(nodes_answering(nodes, "SCARD", name, "readers", "0") == nodes->count);

  /* The write grant extends as a lock does: its key's ttl. */
  CHECK_STATUS(fencelock_lock_extend(writer, 20000, NULL), FENCELOCK_STATUS_OK);
  int extended = 0;
  for (int i = 0; i < nodes->count; i++) extended += atol(on_rw_key(nodes, i, "PTTL", name, "write")) > 10000;
  CHECK(extended >= majority);

  /* A lock of the same name is another thing entirely. */
  fencelock_lock *plain = take(client, name, 5000);
  CHECK(plain != NULL);
  CHECK_STATUS(fencelock_lock_release(plain, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(plain);

  /* Released: the write key is gone and the next reader's token is above the writer's. */
  CHECK_STATUS(fencelock_lock_release(writer, NULL), FENCELOCK_STATUS_OK);
  CHECK(nodes_answering(nodes, "EXISTS", name, "write", "0") >= majority);
  fencelock_lock *reader = NULL;
  CHECK_STATUS(fencelock_rw_read(client, name, 5000, 0, &reader, NULL), FENCELOCK_STATUS_OK);
  CHECK(token_of(reader) > written);
  CHECK_STATUS(fencelock_lock_release(reader, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(reader);
  fencelock_lock_free(writer);
  fencelock_lock_free(first);
  fencelock_lock_free(second);
  fencelock_client_free(client);
}

void test_rw_readers_share_and_a_writer_holds_alone(void) { readers_share_and_a_writer_holds_alone(&single); }

void test_rw_readers_share_and_a_writer_holds_alone_on_three_nodes(void) {
  readers_share_and_a_writer_holds_alone(&trio);
}

/* ---- contention: reads and writes from several threads --------------------- */

#define MAX_WORKERS 8

typedef struct rw_contention {
  redis_nodes *nodes;
  const char *name;
  int rounds;
  atomic_int next_worker;
  atomic_int readers;      /* readers inside their critical section now */
  atomic_int writers;      /* writers inside now */
  atomic_int peak_readers; /* the most readers ever inside at once */
  atomic_int reads;
  atomic_int writes;
  atomic_ullong max_token;        /* the largest token of any grant so far */
  atomic_ullong max_writer_token; /* the largest token of a write grant so far */
  atomic_int errors;              /* anything that must not happen, counted by the workers */
  char first_error[256];
} rw_contention;

static void contention_error(rw_contention *run, const char *what, fencelock_status status) {
  if (atomic_fetch_add(&run->errors, 1) == 0)
    snprintf(run->first_error, sizeof run->first_error, "%s (%s)", what, fencelock_status_name(status));
}

static void raise_to(atomic_ullong *slot, unsigned long long value) {
  for (unsigned long long seen = atomic_load(slot); value > seen && !atomic_compare_exchange_weak(slot, &seen, value);) {
  }
}

static void *contend(void *arg) {
  rw_contention *run = arg;
  int worker = atomic_fetch_add(&run->next_worker, 1);
  fencelock_client *client = connect_to(run->nodes);
  if (client == NULL) {
    contention_error(run, "connect", FENCELOCK_STATUS_OK);
    return NULL;
  }
  for (int round = 0; round < run->rounds; round++) {
    /* A quarter of the later rounds write, spread over the workers; the first round reads. */
    bool write = round > 0 && (worker + round) % 4 == 0;
    fencelock_lock *grant = NULL;
    fencelock_status status = write ? fencelock_rw_write(client, run->name, 5000, 60000, &grant, NULL)
                                    : fencelock_rw_read(client, run->name, 5000, 60000, &grant, NULL);
    if (status != FENCELOCK_STATUS_OK) {
      contention_error(run, write ? "write" : "read", status);
      break;
    }
    unsigned long long token = token_of(grant);
    if (write) {
      if (atomic_fetch_add(&run->writers, 1) != 0) contention_error(run, "two writers at once", FENCELOCK_STATUS_OK);
      if (atomic_load(&run->readers) != 0) contention_error(run, "a writer beside a reader", FENCELOCK_STATUS_OK);
      /* Every grant recorded so far came before this one: its token is above them all. */
      if (token <= atomic_load(&run->max_token))
        contention_error(run, "a writer's token is not above every earlier grant's", FENCELOCK_STATUS_OK);
      raise_to(&run->max_writer_token, token);
      raise_to(&run->max_token, token);
      atomic_fetch_add(&run->writes, 1);
      sleep_ms(1 + round % 3);
      atomic_fetch_sub(&run->writers, 1);
    } else {
      int now = atomic_fetch_add(&run->readers, 1) + 1;
      for (int seen = atomic_load(&run->peak_readers);
           now > seen && !atomic_compare_exchange_weak(&run->peak_readers, &seen, now);) {
      }
      if (atomic_load(&run->writers) != 0) contention_error(run, "a reader beside a writer", FENCELOCK_STATUS_OK);
      /* A writer's token is below every later grant's. */
      if (token <= atomic_load(&run->max_writer_token))
        contention_error(run, "a reader's token is not above an earlier writer's", FENCELOCK_STATUS_OK);
      raise_to(&run->max_token, token);
      atomic_fetch_add(&run->reads, 1);
      /* First round: stay until another reader is inside too (up to 2 s), so
         sharing is seen however slow the machine (under valgrind an acquire
         on three nodes can take longer than a short hold). A mutex never
         lets a second reader in, and the peak check below fails. */
      for (int waited = 0; round == 0 && atomic_load(&run->readers) < 2 && waited < 2000; waited += 5) sleep_ms(5);
      sleep_ms(3 + round % 5);
      atomic_fetch_sub(&run->readers, 1);
    }
    status = fencelock_lock_release(grant, NULL);
    if (status != FENCELOCK_STATUS_OK) contention_error(run, "release", status);
    fencelock_lock_free(grant);
  }
  fencelock_client_free(client);
  return NULL;
}

static void contention_on(redis_nodes *nodes, int workers, int rounds) {
  static rw_contention run;
  memset(&run, 0, sizeof run);
  run.nodes = nodes;
  run.name = unique(nodes->count == 1 ? "rw-contend" : "rw-contend3");
  run.rounds = rounds;
  pthread_t threads[MAX_WORKERS];
  int started = 0;
  for (; started < workers; started++)
    if (pthread_create(&threads[started], NULL, contend, &run) != 0) break;
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  CHECK(started == workers);
  if (atomic_load(&run.errors) != 0) fprintf(stderr, "    first error: %s\n", run.first_error);
  CHECK(atomic_load(&run.errors) == 0);
  CHECK(atomic_load(&run.reads) + atomic_load(&run.writes) == workers * rounds);
  CHECK(atomic_load(&run.writes) > 0);       /* the workload wrote… */
  CHECK(atomic_load(&run.peak_readers) > 1); /* …and readers shared: not a mutex */
  /* All released: a writer gets in at once, and no reader key is left. */
  fencelock_client *client = connect_to(nodes);
  CHECK(client != NULL);
  fencelock_lock *writer = NULL;
  CHECK_STATUS(fencelock_rw_try_write(client, run.name, 5000, &writer, NULL), FENCELOCK_STATUS_OK);
  CHECK(token_of(writer) > atomic_load(&run.max_token));
  /* A release answers once a majority decided; the rest of its nodes follow in
     the background, well within the readers' 5 s lease (which would also clear them). */
  int cleared = nodes_answering(nodes, "SCARD", run.name, "readers", "0");
  for (int waited = 0; cleared < nodes->count && waited < 3000; waited += 20) {
    sleep_ms(20);
    cleared = nodes_answering(nodes, "SCARD", run.name, "readers", "0");
  }
  CHECK(cleared == nodes->count);
  CHECK_STATUS(fencelock_lock_release(writer, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(writer);
  fencelock_client_free(client);
}

void test_rw_contention(void) { contention_on(&single, 6, 10); }

void test_rw_contention_on_three_nodes(void) { contention_on(&trio, 5, 8); }

/* ---- a waiting writer is not overtaken ------------------------------------- */

/* Once a writer waits, readers that ask later queue behind it: it waits only
 * for the reader already holding. Fails without the writer-ahead rule. */
void test_rw_waiting_writer_is_not_overtaken_by_later_readers(void) {
  fencelock_client *holder = connect_to(&single), *writing = connect_to(&single), *reading = connect_to(&single);
  CHECK(holder != NULL && writing != NULL && reading != NULL);
  const char *name = unique("rw-queue");
  fencelock_lock *early = NULL;
  CHECK_STATUS(fencelock_rw_read(holder, name, 5000, 0, &early, NULL), FENCELOCK_STATUS_OK);

  static async_record writer, late;
  memset(&writer, 0, sizeof writer);
  memset(&late, 0, sizeof late);
  CHECK_STATUS(
      fencelock_rw_write_async(writing, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &writer, NULL, NULL),
      FENCELOCK_STATUS_OK);
  CHECK(writers_waiting(&single, name, 1, 5000)); /* queued */
  CHECK(atomic_load(&writer.calls) == 0);

  /* Only a reader holds, yet a reader asking now is refused: a writer waits ahead of it. */
  fencelock_lock *overtaking = (fencelock_lock *)0x1;
  CHECK_STATUS(fencelock_rw_try_read(reading, name, 5000, &overtaking, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(fencelock_rw_read(reading, name, 5000, 150, &overtaking, NULL), FENCELOCK_STATUS_TIMEOUT);
  CHECK(overtaking == (fencelock_lock *)0x1);
  CHECK_STATUS(fencelock_rw_read_async(reading, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &late, NULL, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&late.calls) == 0 && atomic_load(&writer.calls) == 0);

  /* The early reader leaves: the writer goes first, the late reader still waits. */
  CHECK_STATUS(fencelock_lock_release(early, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&writer.calls, 1, 10000));
  CHECK(writer.status == FENCELOCK_STATUS_OK && writer.lock != NULL);
  CHECK(token_of(writer.lock) > token_of(early));
  sleep_ms(200);
  CHECK(atomic_load(&late.calls) == 0);

  /* Then the late reader, woken by the writer's release. */
  CHECK_STATUS(fencelock_lock_release(writer.lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&late.calls, 1, 10000));
  CHECK(late.status == FENCELOCK_STATUS_OK && late.lock != NULL);
  CHECK(token_of(late.lock) > token_of(writer.lock));
  CHECK_STATUS(fencelock_lock_release(late.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(early);
  fencelock_lock_free(writer.lock);
  fencelock_lock_free(late.lock);
  fencelock_client_free(holder);
  fencelock_client_free(writing);
  fencelock_client_free(reading);
}

/* ---- a reader's loss ------------------------------------------------------- */

typedef struct reader_loss {
  atomic_int calls;
  fencelock_loss_reason reason;
} reader_loss;

static void on_reader_lost(void *user_data, fencelock_loss_reason reason) {
  reader_loss *record = user_data;
  record->reason = reason;
  atomic_fetch_add(&record->calls, 1);
}

/* The one member of `members` (space-separated) that is not `other`, copied to `out`. */
static bool other_member(const char *members, const char *other, char *out, size_t size) {
  char copy[1024];
  snprintf(copy, sizeof copy, "%s", members);
  char *rest = NULL;
  bool found = false;
  for (char *key = strtok_r(copy, " ", &rest); key != NULL; key = strtok_r(NULL, " ", &rest)) {
    if (strcmp(key, other) == 0) continue;
    if (found) return false;
    snprintf(out, size, "%s", key);
    found = true;
  }
  return found;
}

void test_rw_reader_lost_while_another_stays(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("rw-lost");
  fencelock_lock *doomed = NULL, *kept = NULL;
  char doomed_key[256], kept_key[256];
  CHECK_STATUS(fencelock_rw_read(client, name, 1000, 0, &doomed, NULL), FENCELOCK_STATUS_OK);
  CHECK(other_member(on_rw_key(&single, 0, "SMEMBERS", name, "readers"), "", doomed_key, sizeof doomed_key));
  CHECK_STATUS(fencelock_rw_read(client, name, 1000, 0, &kept, NULL), FENCELOCK_STATUS_OK);
  CHECK(other_member(on_rw_key(&single, 0, "SMEMBERS", name, "readers"), doomed_key, kept_key, sizeof kept_key));
  CHECK(is_reader_key(doomed_key, name) && is_reader_key(kept_key, name));
  static reader_loss record;
  memset(&record, 0, sizeof record);
  CHECK_STATUS(fencelock_lock_on_lost(kept, on_reader_lost, &record, NULL), FENCELOCK_STATUS_OK);

  /* Renewals keep both past their 1 s ttl. */
  sleep_ms(1500);
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(doomed, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  char command[320];
  snprintf(command, sizeof command, "EXISTS %s", doomed_key);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);

  /* One reader's key deleted behind its back: that reader, and only it, is lost. */
  snprintf(command, sizeof command, "DEL %s", doomed_key);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_event event;
  CHECK_STATUS(fencelock_client_next_event(client, 10000, &event), FENCELOCK_STATUS_OK);
  CHECK(event.kind == FENCELOCK_EVENT_LOCK_LOST && event.reason == FENCELOCK_LOSS_DELETED);
  CHECK(event.fencing_token == token_of(doomed) && strcmp(event.resource, name) == 0);
  fencelock_event_clear(&event);
  CHECK_STATUS(fencelock_lock_is_held(doomed, &held), FENCELOCK_STATUS_OK);
  CHECK(!held);
  CHECK_STATUS(fencelock_lock_extend(doomed, 1000, NULL), FENCELOCK_STATUS_LOST);
  CHECK_STATUS(fencelock_lock_release(doomed, NULL), FENCELOCK_STATUS_NOT_HELD);
  CHECK_STATUS(fencelock_lock_is_held(kept, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  CHECK(atomic_load(&record.calls) == 0);
  snprintf(command, sizeof command, "EXISTS %s", kept_key);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_lock *writer = (fencelock_lock *)0x1;
  CHECK_STATUS(fencelock_rw_try_write(client, name, 5000, &writer, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);

  /* The other one through its own lost callback; then nothing holds, and a writer gets in. */
  snprintf(command, sizeof command, "DEL %s", kept_key);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  CHECK(wait_for(&record.calls, 1, 10000));
  CHECK(record.reason == FENCELOCK_LOSS_DELETED);
  CHECK_STATUS(fencelock_client_next_event(client, 0, &event), FENCELOCK_STATUS_TIMEOUT); /* the callback had it */
  CHECK_STATUS(fencelock_rw_try_write(client, name, 5000, &writer, NULL), FENCELOCK_STATUS_OK);
  CHECK(token_of(writer) > token_of(kept));
  CHECK_STATUS(fencelock_lock_release(writer, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(writer);
  fencelock_lock_free(doomed);
  fencelock_lock_free(kept);
  fencelock_client_free(client);
}

/* ---- callback variants ----------------------------------------------------- */

void test_rw_async_read_and_write(void) {
  fencelock_client *first = connect_to(&single), *second = connect_to(&single);
  CHECK(first != NULL && second != NULL);
  const char *name = unique("rw-async");
  static async_record writer, busy, cancelled_read, cancelled_write, reader_a, reader_b, last_writer, released;
  memset(&writer, 0, sizeof writer);
  memset(&busy, 0, sizeof busy);
  memset(&cancelled_read, 0, sizeof cancelled_read);
  memset(&cancelled_write, 0, sizeof cancelled_write);
  memset(&reader_a, 0, sizeof reader_a);
  memset(&reader_b, 0, sizeof reader_b);
  memset(&last_writer, 0, sizeof last_writer);
  memset(&released, 0, sizeof released);

  /* A free lock: the callback gets the write grant. */
  CHECK_STATUS(fencelock_rw_write_async(first, name, 5000, 0, on_acquired, &writer, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&writer.calls, 1, 5000));
  CHECK(writer.status == FENCELOCK_STATUS_OK && writer.lock != NULL);
  CHECK(strcmp(fencelock_lock_resource(writer.lock), name) == 0);

  /* Written, no wait: a read is NOT_ACQUIRED through the callback. */
  CHECK_STATUS(fencelock_rw_read_async(second, name, 5000, 0, on_acquired, &busy, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&busy.calls, 1, 5000));
  CHECK(busy.status == FENCELOCK_STATUS_NOT_ACQUIRED && busy.lock == NULL);

  /* Cancelled waiters, a reader and a writer, are told CANCELLED once. */
  fencelock_operation *read_operation = NULL, *write_operation = NULL;
  CHECK_STATUS(fencelock_rw_read_async(second, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &cancelled_read,
                                       &read_operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_write_async(second, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &cancelled_write,
                                        &write_operation, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(writers_waiting(&single, name, 1, 5000)); /* the writer is in line */
  CHECK(atomic_load(&cancelled_read.calls) == 0 && atomic_load(&cancelled_write.calls) == 0);
  CHECK_STATUS(fencelock_operation_cancel(read_operation), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_operation_cancel(write_operation), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&cancelled_read.calls, 1, 5000) && wait_for(&cancelled_write.calls, 1, 5000));
  CHECK(cancelled_read.status == FENCELOCK_STATUS_CANCELLED && cancelled_read.lock == NULL);
  CHECK(cancelled_write.status == FENCELOCK_STATUS_CANCELLED && cancelled_write.lock == NULL);
  fencelock_operation_free(read_operation);
  fencelock_operation_free(write_operation);

  /* Two readers waiting are both woken by the writer's release (the cancelled writer is not ahead of them). */
  CHECK_STATUS(fencelock_rw_read_async(second, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &reader_a, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_read_async(first, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &reader_b, NULL, NULL),
               FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&reader_a.calls) == 0 && atomic_load(&reader_b.calls) == 0); /* waiting in line */
  CHECK_STATUS(fencelock_lock_release(writer.lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&reader_a.calls, 1, 10000) && wait_for(&reader_b.calls, 1, 10000));
  CHECK(reader_a.status == FENCELOCK_STATUS_OK && reader_b.status == FENCELOCK_STATUS_OK);
  uint64_t written = token_of(writer.lock);
  CHECK(token_of(reader_a.lock) > written && token_of(reader_b.lock) > written);
  bool held = false;
  CHECK_STATUS(fencelock_lock_is_held(reader_a.lock, &held), FENCELOCK_STATUS_OK);
  CHECK(held);
  CHECK_STATUS(fencelock_lock_is_held(reader_b.lock, &held), FENCELOCK_STATUS_OK);
  CHECK(held); /* together */

  /* A writer waits for both readers, and is woken by the last one's release. */
  CHECK_STATUS(
      fencelock_rw_write_async(first, name, 5000, FENCELOCK_MAX_WAIT_MS, on_acquired, &last_writer, NULL, NULL),
      FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&last_writer.calls) == 0);
  CHECK_STATUS(fencelock_lock_release(reader_a.lock, NULL), FENCELOCK_STATUS_OK);
  sleep_ms(200);
  CHECK(atomic_load(&last_writer.calls) == 0); /* one reader still in */
  CHECK_STATUS(fencelock_lock_release_async(reader_b.lock, on_done, &released, NULL, NULL), FENCELOCK_STATUS_OK);
  CHECK(wait_for(&released.calls, 1, 5000) && released.status == FENCELOCK_STATUS_OK);
  CHECK(wait_for(&last_writer.calls, 1, 10000));
  CHECK(last_writer.status == FENCELOCK_STATUS_OK && last_writer.lock != NULL);
  CHECK(token_of(last_writer.lock) > token_of(reader_a.lock) && token_of(last_writer.lock) > token_of(reader_b.lock));
  sleep_ms(100);
  CHECK(atomic_load(&cancelled_read.calls) == 1 && atomic_load(&cancelled_write.calls) == 1);
  CHECK(atomic_load(&reader_a.calls) == 1 && atomic_load(&reader_b.calls) == 1); /* each exactly once */
  CHECK(atomic_load(&last_writer.calls) == 1);
  CHECK_STATUS(fencelock_lock_release(last_writer.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(writer.lock);
  fencelock_lock_free(reader_a.lock);
  fencelock_lock_free(reader_b.lock);
  fencelock_lock_free(last_writer.lock);
  fencelock_client_free(first);
  fencelock_client_free(second);
}

/* With a live waiter first in the lock's line, fair reads and writes are
 * refused though nothing holds; without fair both go in. The blocking and
 * the callback variants both carry the options. */
void test_rw_fair_option(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("rw-fair");
  char command[256];
  snprintf(command, sizeof command, "ZADD fencelock:{%s}:rw:queue 1 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", name);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  snprintf(command, sizeof command,
           "ZADD fencelock:{%s}:rw:leases 99999999999999 eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1", name);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(5000, &options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_wait_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_options_set_fair(options, true), FENCELOCK_STATUS_OK);
  fencelock_lock *reader = NULL, *writer = NULL;
  CHECK_STATUS(fencelock_rw_read_with(client, name, options, &reader, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK_STATUS(fencelock_rw_write_with(client, name, options, &writer, NULL), FENCELOCK_STATUS_NOT_ACQUIRED);
  static async_record fair_read, fair_write, read, write;
  memset(&fair_read, 0, sizeof fair_read);
  memset(&fair_write, 0, sizeof fair_write);
  memset(&read, 0, sizeof read);
  memset(&write, 0, sizeof write);
  CHECK_STATUS(fencelock_rw_read_with_async(client, name, options, on_acquired, &fair_read, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_write_with_async(client, name, options, on_acquired, &fair_write, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&fair_read.calls, 1, 5000) && wait_for(&fair_write.calls, 1, 5000));
  CHECK(fair_read.status == FENCELOCK_STATUS_NOT_ACQUIRED && fair_write.status == FENCELOCK_STATUS_NOT_ACQUIRED);
  CHECK(strcmp(on_rw_key(&single, 0, "SCARD", name, "readers"), "0") == 0);
  CHECK(strcmp(on_rw_key(&single, 0, "EXISTS", name, "write"), "0") == 0);

  CHECK_STATUS(fencelock_lock_options_set_fair(options, false), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_read_with(client, name, options, &reader, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_read_with_async(client, name, options, on_acquired, &read, NULL, NULL),
               FENCELOCK_STATUS_OK);
  CHECK(wait_for(&read.calls, 1, 5000));
  CHECK(read.status == FENCELOCK_STATUS_OK && read.lock != NULL); /* two readers, side by side */
  CHECK(strcmp(on_rw_key(&single, 0, "SCARD", name, "readers"), "2") == 0);
  CHECK_STATUS(fencelock_lock_release(reader, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(read.lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_write_with(client, name, options, &writer, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(writer, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_rw_write_with_async(client, name, options, on_acquired, &write, NULL, NULL),
               FENCELOCK_STATUS_OK);
  fencelock_lock_options_free(options); /* copied by the calls */
  CHECK(wait_for(&write.calls, 1, 5000));
  CHECK(write.status == FENCELOCK_STATUS_OK && write.lock != NULL);
  CHECK(token_of(write.lock) > token_of(writer));
  CHECK_STATUS(fencelock_lock_release(write.lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(reader);
  fencelock_lock_free(read.lock);
  fencelock_lock_free(writer);
  fencelock_lock_free(write.lock);
  fencelock_client_free(client);
}

/* ---- bad arguments --------------------------------------------------------- */

/* The five calls of one side (read or write), to check both alike. */
typedef struct rw_side {
  fencelock_status (*acquire)(const fencelock_client *, const char *, uint64_t, uint64_t, fencelock_lock **,
                              fencelock_error **);
  fencelock_status (*try_acquire)(const fencelock_client *, const char *, uint64_t, fencelock_lock **,
                                  fencelock_error **);
  fencelock_status (*with)(const fencelock_client *, const char *, const fencelock_lock_options *,
                           fencelock_lock **, fencelock_error **);
  fencelock_status (*start)(const fencelock_client *, const char *, uint64_t, uint64_t, fencelock_acquire_callback,
                            void *, fencelock_operation **, fencelock_error **);
  fencelock_status (*start_with)(const fencelock_client *, const char *, const fencelock_lock_options *,
                                 fencelock_acquire_callback, void *, fencelock_operation **, fencelock_error **);
} rw_side;

static const rw_side sides[2] = {
    {fencelock_rw_read, fencelock_rw_try_read, fencelock_rw_read_with, fencelock_rw_read_async,
     fencelock_rw_read_with_async},
    {fencelock_rw_write, fencelock_rw_try_write, fencelock_rw_write_with, fencelock_rw_write_async,
     fencelock_rw_write_with_async},
};

void test_bad_rw_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  const char *name = unique("rw-bad");
  static char too_long[FENCELOCK_MAX_RESOURCE_BYTES + 2];
  memset(too_long, 'x', FENCELOCK_MAX_RESOURCE_BYTES + 1);
  static async_record never;
  memset(&never, 0, sizeof never);
  fencelock_lock_options *options = NULL;
  CHECK_STATUS(fencelock_lock_options_new(1000, &options), FENCELOCK_STATUS_OK);
  fencelock_lock *lock = (fencelock_lock *)0x1;
  fencelock_operation *operation = (fencelock_operation *)0x1;

  for (int s = 0; s < 2; s++) {
    const rw_side *side = &sides[s];
    /* Bad names: empty (with a message), oversized, not UTF-8, NULL, starting with '}'. */
    fencelock_error *error = NULL;
    CHECK_STATUS(side->acquire(client, "", 1000, 0, &lock, &error), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK(strstr(fencelock_error_message(error), "empty") != NULL);
    fencelock_error_free(error);
    CHECK_STATUS(side->acquire(client, too_long, 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->acquire(client, "}x", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->acquire(client, "\xff", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_UTF8);
    CHECK_STATUS(side->acquire(client, NULL, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->try_acquire(client, "", 1000, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->with(client, "", options, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->start(client, "", 1000, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->start(client, too_long, 1000, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->start(client, "\xff", 1000, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_UTF8);
    CHECK_STATUS(side->start_with(client, "", options, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    /* Bad ttls and waits. */
    CHECK_STATUS(side->acquire(client, name, 0, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->acquire(client, name, (uint64_t)FENCELOCK_MAX_TTL_MS + 1, 0, &lock, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->acquire(client, name, 1000, FENCELOCK_MAX_WAIT_MS + 1, &lock, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->try_acquire(client, name, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->start(client, name, 0, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK_STATUS(side->start(client, name, 1000, FENCELOCK_MAX_WAIT_MS + 1, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_INVALID_ARGUMENT);
    /* NULLs. */
    CHECK_STATUS(side->acquire(NULL, name, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->acquire(client, name, 1000, 0, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->try_acquire(NULL, name, 1000, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->try_acquire(client, name, 1000, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->with(client, name, NULL, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->with(client, NULL, options, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->with(client, name, options, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->start(NULL, name, 1000, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->start(client, NULL, 1000, 0, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->start(client, name, 1000, 0, NULL, NULL, &operation, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->start_with(client, name, NULL, on_acquired, &never, &operation, NULL),
                 FENCELOCK_STATUS_NULL_ARGUMENT);
    CHECK_STATUS(side->start_with(client, name, options, NULL, NULL, &operation, NULL),
                 FENCELOCK_STATUS_NULL_ARGUMENT);
  }
  CHECK(lock == (fencelock_lock *)0x1 && operation == (fencelock_operation *)0x1); /* untouched on failure */
  sleep_ms(100);
  CHECK(atomic_load(&never.calls) == 0); /* a refused start never calls back */
  /* Nothing was taken: a writer gets in at once. */
  fencelock_lock *writer = NULL;
  CHECK_STATUS(fencelock_rw_try_write(client, name, 1000, &writer, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_release(writer, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(writer);
  fencelock_lock_options_free(options);
  fencelock_client_free(client);
}
