/*
 * The core's log records through a C log callback (fencelock_log_forward,
 * fencelock_log_set_level): a scripted scenario on nodes of its own (an
 * acquisition at DEBUG, renewals at TRACE, an unreachable node and a loss at
 * WARN), the level switch (WARN, OFF), bad levels, a NULL callback, and no
 * password or lock token in any record. The level enum against the vectors'
 * log_levels table too.
 *
 * Forwarding is process-wide: these tests leave it stopped.
 */
#define _GNU_SOURCE
#include "support.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A copy of one record: the callback's record is lent for the call only. */
typedef struct log_copy {
  fencelock_log_level level;
  char *target, *message, *fields, *line;
} log_copy;

/* What one callback received, in order; `mutex` guards everything below it. */
typedef struct log_collector {
  pthread_mutex_t mutex;
  log_copy *records;
  size_t count, capacity;
  pthread_t caller;      /* the thread that runs the test */
  int on_caller_thread;  /* a record was delivered on it */
  int null_string;       /* a record had a NULL string */
  int closed;            /* the test is over: drop whatever still comes */
} log_collector;

static char *copy_text(const char *text, int *was_null) {
  if (text == NULL) {
    *was_null = 1;
    return strdup("");
  }
  return strdup(text);
}

static void on_record(const fencelock_log_record *record, void *user_data) {
  log_collector *collector = user_data;
  pthread_mutex_lock(&collector->mutex);
  if (pthread_equal(pthread_self(), collector->caller)) collector->on_caller_thread = 1;
  if (!collector->closed) {
    if (collector->count == collector->capacity) {
      size_t capacity = collector->capacity == 0 ? 64 : collector->capacity * 2;
      log_copy *grown = realloc(collector->records, capacity * sizeof *grown);
      if (grown == NULL) goto out;
      collector->records = grown;
      collector->capacity = capacity;
    }
    log_copy *copy = &collector->records[collector->count++];
    copy->level = record->level;
    copy->target = copy_text(record->target, &collector->null_string);
    copy->message = copy_text(record->message, &collector->null_string);
    copy->fields = copy_text(record->fields, &collector->null_string);
    copy->line = copy_text(record->line, &collector->null_string);
  }
out:
  pthread_mutex_unlock(&collector->mutex);
}

static void collector_init(log_collector *collector) {
  memset(collector, 0, sizeof *collector);
  pthread_mutex_init(&collector->mutex, NULL);
  collector->caller = pthread_self();
}

/* Frees the copies; a call still in progress (or a late one) drops its record. */
static void collector_close(log_collector *collector) {
  pthread_mutex_lock(&collector->mutex);
  for (size_t i = 0; i < collector->count; i++) {
    free(collector->records[i].target);
    free(collector->records[i].message);
    free(collector->records[i].fields);
    free(collector->records[i].line);
  }
  free(collector->records);
  collector->records = NULL;
  collector->count = collector->capacity = 0;
  collector->closed = 1;
  pthread_mutex_unlock(&collector->mutex);
}

static size_t collected(log_collector *collector) {
  pthread_mutex_lock(&collector->mutex);
  size_t count = collector->count;
  pthread_mutex_unlock(&collector->mutex);
  return count;
}

/* `fields` has the field name=value, whole (a value may hold spaces, so the
 * pair ends at a space or at the end). */
static int has_field(const char *fields, const char *name, const char *value) {
  char pair[256];
  snprintf(pair, sizeof pair, "%s=%s", name, value);
  size_t len = strlen(pair);
  for (const char *at = strstr(fields, pair); at != NULL; at = strstr(at + 1, pair)) {
    int starts = at == fields || at[-1] == ' ';
    int ends = at[len] == '\0' || at[len] == ' ';
    if (starts && ends) return 1;
  }
  return 0;
}

/* The index (from `from` on) of a record with `message` about `resource`,
 * polled for up to `ms`; -1 when none came. Records are only appended, and
 * the caller reads one only after this found it, under the mutex. */
static long find_record(log_collector *collector, size_t from, const char *message, const char *resource, long ms) {
  for (long waited = 0;; waited += 10) {
    pthread_mutex_lock(&collector->mutex);
    for (size_t i = from; i < collector->count; i++) {
      const log_copy *r = &collector->records[i];
      if (strcmp(r->message, message) == 0 && (resource == NULL || has_field(r->fields, "resource", resource))) {
        pthread_mutex_unlock(&collector->mutex);
        return (long)i;
      }
    }
    pthread_mutex_unlock(&collector->mutex);
    if (waited >= ms) return -1;
    sleep_ms(10);
  }
}

/* The record at `index`, copied out under the mutex (its strings stay the collector's). */
static log_copy record_at(log_collector *collector, long index) {
  pthread_mutex_lock(&collector->mutex);
  log_copy copy = collector->records[index];
  pthread_mutex_unlock(&collector->mutex);
  return copy;
}

/* How many records from `from` on are below `level` in severity (more verbose), or mention `text`. */
static size_t count_since(log_collector *collector, size_t from, fencelock_log_level most_verbose, const char *text) {
  size_t n = 0;
  pthread_mutex_lock(&collector->mutex);
  for (size_t i = from; i < collector->count; i++) {
    const log_copy *r = &collector->records[i];
    if (r->level > most_verbose || (text != NULL && strstr(r->line, text) != NULL)) n++;
  }
  pthread_mutex_unlock(&collector->mutex);
  return n;
}

/* Records more verbose than `most_verbose` whose line mentions `text`. */
static size_t count_verbose_about(log_collector *collector, size_t from, fencelock_log_level most_verbose,
                                  const char *text) {
  size_t n = 0;
  pthread_mutex_lock(&collector->mutex);
  for (size_t i = from; i < collector->count; i++) {
    const log_copy *r = &collector->records[i];
    if (r->level > most_verbose && strstr(r->line, text) != NULL) n++;
  }
  pthread_mutex_unlock(&collector->mutex);
  return n;
}

/* No record was delivered on the test's thread, none had a NULL string. */
static int delivered_properly(log_collector *collector) {
  pthread_mutex_lock(&collector->mutex);
  int proper = !collector->on_caller_thread && !collector->null_string;
  pthread_mutex_unlock(&collector->mutex);
  return proper;
}

static void print_records(log_collector *collector, size_t from) {
  pthread_mutex_lock(&collector->mutex);
  for (size_t i = from; i < collector->count; i++)
    fprintf(stderr, "      [%d] %s: %s\n", (int)collector->records[i].level, collector->records[i].target,
            collector->records[i].line);
  pthread_mutex_unlock(&collector->mutex);
}

/* Deletes the lock key of `resource` on nodes 0 and 1 (of three, one dead): a majority. */
static void delete_on_majority(redis_nodes *nodes, const char *resource) {
  char command[256];
  snprintf(command, sizeof command, "DEL fencelock:{%s}", resource);
  redis(nodes, 0, command);
  redis(nodes, 1, command);
}

static log_collector first, second;

#define PASSWORD "pw-SECRET-4711"

/* Every string of every record lacks the password and each lock token. */
static void check_no_secret(log_collector *collector, char tokens[][64], int n_tokens) {
  pthread_mutex_lock(&collector->mutex);
  int leaked = 0;
  for (size_t i = 0; i < collector->count && !leaked; i++) {
    const log_copy *r = &collector->records[i];
    const char *texts[] = {r->target, r->message, r->fields, r->line};
    for (int t = 0; t < 4 && !leaked; t++) {
      if (strstr(texts[t], PASSWORD) != NULL) leaked = 1;
      for (int k = 0; k < n_tokens; k++)
        if (tokens[k][0] != '\0' && strstr(texts[t], tokens[k]) != NULL) leaked = 1;
    }
    if (leaked) fprintf(stderr, "    a secret reached a record: %s\n", r->line);
  }
  pthread_mutex_unlock(&collector->mutex);
  CHECK(!leaked);
}

/* The lock's random token (32 hex digits) as node 0 stores it. */
static void read_token(redis_nodes *nodes, const char *resource, char out[64]) {
  char command[256];
  snprintf(command, sizeof command, "GET fencelock:{%s}", resource);
  snprintf(out, 64, "%s", redis(nodes, 0, command));
}

static void log_scenario(redis_nodes *nodes) {
  char tokens[4][64];
  memset(tokens, 0, sizeof tokens);
  CHECK_STATUS(fencelock_log_forward(on_record, &first, FENCELOCK_LOG_TRACE, NULL), FENCELOCK_STATUS_OK);

  /* An ACL user with a password in the URLs; node 2 down before the client starts. */
  char reply[256];
  for (int i = 0; i < 3; i++) {
    const char *ok = redis(nodes, i, "ACL SETUSER app on >" PASSWORD " ~* &* +@all");
    CHECK(strcmp(ok, "OK") == 0);
  }
  CHECK(redis_nodes_run(nodes, reply, sizeof reply, "kill 2") == 0);
  char urls[3][128];
  const char *url_list[3];
  for (int i = 0; i < 3; i++) {
    CHECK(strncmp(nodes->urls[i], "redis://", 8) == 0);
    snprintf(urls[i], sizeof urls[i], "redis://app:" PASSWORD "@%s", nodes->urls[i] + 8);
    url_list[i] = urls[i];
  }
  const char *unreachable = nodes->urls[2] + 8; /* 127.0.0.1:PORT */
  fencelock_options *options = NULL;
  fencelock_client *client = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS), FENCELOCK_STATUS_OK);
  fencelock_status status = fencelock_client_new(url_list, 3, options, &client, NULL);
  fencelock_options_free(options);
  CHECK_STATUS(status, FENCELOCK_STATUS_OK);

  /* At TRACE: the acquisition (DEBUG), renewals (TRACE), the loss (WARN). */
  const char *acquired_res = unique("log-acquired");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, acquired_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  read_token(nodes, acquired_res, tokens[0]);
  CHECK(strlen(tokens[0]) == 32 && strspn(tokens[0], "0123456789abcdef") == 32);
  uint64_t fencing_token = 0;
  CHECK_STATUS(fencelock_lock_fencing_token(lock, &fencing_token), FENCELOCK_STATUS_OK);
  long at = find_record(&first, 0, "lock acquired", acquired_res, 10000);
  if (at < 0) print_records(&first, 0);
  CHECK(at >= 0);
  log_copy acquired = record_at(&first, at);
  CHECK(acquired.level == FENCELOCK_LOG_DEBUG);
  CHECK(strncmp(acquired.target, "fencelock", 9) == 0);
  char token_text[32];
  snprintf(token_text, sizeof token_text, "%llu", (unsigned long long)fencing_token);
  CHECK(has_field(acquired.fields, "fencing_token", token_text));
  char expected_line[512];
  snprintf(expected_line, sizeof expected_line, "%s %s", acquired.message, acquired.fields);
  CHECK(strcmp(acquired.line, expected_line) == 0);

  at = find_record(&first, 0, "lock renewed", acquired_res, 10000);
  CHECK(at >= 0 && record_at(&first, at).level == FENCELOCK_LOG_TRACE);
  at = find_record(&first, 0, "node unreachable at start; will retry on use", NULL, 0);
  CHECK(at >= 0);
  log_copy down = record_at(&first, at);
  CHECK(down.level == FENCELOCK_LOG_WARN && strstr(down.fields, unreachable) != NULL);

  delete_on_majority(nodes, acquired_res);
  at = find_record(&first, 0, "lock lost", acquired_res, 10000);
  if (at < 0) print_records(&first, 0);
  CHECK(at >= 0);
  log_copy lost = record_at(&first, at);
  CHECK(lost.level == FENCELOCK_LOG_WARN && strstr(lost.fields, " reason=") != NULL);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_NOT_HELD);
  fencelock_lock_free(lock);
  CHECK(delivered_properly(&first));

  /* At WARN: a loss still comes, the acquisition before it does not. Bad
   * levels meanwhile change nothing. */
  size_t mark = collected(&first);
  CHECK_STATUS(fencelock_log_set_level(FENCELOCK_LOG_WARN), FENCELOCK_STATUS_OK);
  const int32_t bad_levels[] = {9, -1, 6};
  for (size_t i = 0; i < sizeof bad_levels / sizeof bad_levels[0]; i++) {
    fencelock_error *error = NULL;
    CHECK_STATUS(fencelock_log_forward(on_record, &second, bad_levels[i], &error), FENCELOCK_STATUS_INVALID_ARGUMENT);
    CHECK(fencelock_error_status(error) == FENCELOCK_STATUS_INVALID_ARGUMENT);
    char number[16];
    snprintf(number, sizeof number, "%d", (int)bad_levels[i]);
    const char *message = fencelock_error_message(error);
    CHECK(strstr(message, number) != NULL && strstr(message, "fencelock_log_level") != NULL);
    fencelock_error_free(error);
    CHECK_STATUS(fencelock_log_set_level(bad_levels[i]), FENCELOCK_STATUS_INVALID_ARGUMENT);
  }
  const char *warn_res = unique("log-warn");
  CHECK_STATUS(fencelock_acquire(client, warn_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  read_token(nodes, warn_res, tokens[1]);
  delete_on_majority(nodes, warn_res);
  /* Delivered in order: anything the acquisition logged came before its loss.
   * (Records logged before the level changed may still arrive after the mark:
   * only those about this new resource count.) */
  at = find_record(&first, mark, "lock lost", warn_res, 10000);
  CHECK(at >= 0);
  if (count_verbose_about(&first, mark, FENCELOCK_LOG_WARN, warn_res) != 0) print_records(&first, mark);
  CHECK(count_verbose_about(&first, mark, FENCELOCK_LOG_WARN, warn_res) == 0);
  CHECK(collected(&second) == 0);
  fencelock_lock_free(lock);

  /* OFF: nothing, not even a loss. Back at WARN, the next loss shows that
   * everything logged meanwhile would have been delivered by then. */
  mark = collected(&first);
  CHECK_STATUS(fencelock_log_set_level(FENCELOCK_LOG_OFF), FENCELOCK_STATUS_OK);
  const char *off_res = unique("log-off");
  CHECK_STATUS(fencelock_acquire(client, off_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  read_token(nodes, off_res, tokens[2]);
  delete_on_majority(nodes, off_res);
  bool held = true;
  for (long waited = 0; held && waited < 10000; waited += 10) {
    CHECK_STATUS(fencelock_lock_is_held(lock, &held), FENCELOCK_STATUS_OK);
    if (held) sleep_ms(10);
  }
  CHECK(!held);
  fencelock_lock_free(lock);
  CHECK_STATUS(fencelock_log_set_level(FENCELOCK_LOG_WARN), FENCELOCK_STATUS_OK);
  const char *after_off_res = unique("log-after-off");
  CHECK_STATUS(fencelock_acquire(client, after_off_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  delete_on_majority(nodes, after_off_res);
  CHECK(find_record(&first, mark, "lock lost", after_off_res, 10000) >= 0);
  if (count_since(&first, mark, FENCELOCK_LOG_WARN, off_res) != 0) print_records(&first, mark);
  CHECK(count_since(&first, mark, FENCELOCK_LOG_WARN, off_res) == 0);
  fencelock_lock_free(lock);

  /* A NULL callback stops forwarding, whatever the level says next; a new
   * callback then gets the records and the old one nothing. */
  CHECK_STATUS(fencelock_log_forward(NULL, NULL, FENCELOCK_LOG_DEBUG, NULL), FENCELOCK_STATUS_OK);
  /* A call already under way when forwarding stopped may still finish. */
  sleep_ms(100);
  mark = collected(&first);
  CHECK_STATUS(fencelock_log_set_level(FENCELOCK_LOG_DEBUG), FENCELOCK_STATUS_OK);
  const char *stopped_res = unique("log-stopped");
  CHECK_STATUS(fencelock_acquire(client, stopped_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  read_token(nodes, stopped_res, tokens[3]);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  CHECK_STATUS(fencelock_log_forward(on_record, &second, FENCELOCK_LOG_DEBUG, NULL), FENCELOCK_STATUS_OK);
  const char *resumed_res = unique("log-resumed");
  CHECK_STATUS(fencelock_acquire(client, resumed_res, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK(find_record(&second, 0, "lock acquired", resumed_res, 10000) >= 0);
  CHECK(collected(&first) == mark);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  CHECK(find_record(&second, 0, "lock released", resumed_res, 10000) >= 0);
  CHECK(delivered_properly(&second));
  fencelock_client_free(client);

  /* No record of either callback carries the password or a lock's token. */
  check_no_secret(&first, tokens, 4);
  check_no_secret(&second, tokens, 4);
}

void test_log_records_reach_the_callback_at_its_level_without_secrets(void) {
  collector_init(&first);
  collector_init(&second);
  redis_nodes nodes;
  CHECK(redis_nodes_start(&nodes, 3) == 0);
  log_scenario(&nodes);
  /* Stopped whatever happened: the collectors are freed next. */
  CHECK_STATUS(fencelock_log_forward(NULL, NULL, FENCELOCK_LOG_OFF, NULL), FENCELOCK_STATUS_OK);
  redis_nodes_stop(&nodes);
  collector_close(&first);
  collector_close(&second);
}

/* The vectors' log_levels table (name, c_value) is this header's enum, one
 * entry per level; OFF (0) is a threshold, not a level, so not in it. */
void test_log_levels_are_the_vectors(void) {
  static const struct {
    const char *name;
    fencelock_log_level value;
  } levels[] = {
      {"error", FENCELOCK_LOG_ERROR}, {"warn", FENCELOCK_LOG_WARN},   {"info", FENCELOCK_LOG_INFO},
      {"debug", FENCELOCK_LOG_DEBUG}, {"trace", FENCELOCK_LOG_TRACE},
  };
  const size_t n_levels = sizeof levels / sizeof levels[0];
  const char *path = getenv("FENCELOCK_VECTORS");
  CHECK(path != NULL);
  FILE *file = fopen(path, "r");
  CHECK(file != NULL);
  char line[2048];
  int inside = 0, entries = 0, seen[8] = {0};
  while (fgets(line, sizeof line, file) != NULL) {
    if (strstr(line, "\"log_levels\": [") != NULL) {
      inside = 1;
      continue;
    }
    if (!inside) continue;
    if (strstr(line, "]") != NULL && strstr(line, "{") == NULL) break;
    const char *name = strstr(line, "\"name\": \"");
    const char *value = strstr(line, "\"c_value\": ");
    if (name == NULL || value == NULL) {
      fclose(file);
      CHECK(name != NULL && value != NULL);
    }
    name += strlen("\"name\": \"");
    long c_value = strtol(value + strlen("\"c_value\": "), NULL, 10);
    size_t found = n_levels;
    for (size_t i = 0; i < n_levels; i++) {
      size_t len = strlen(levels[i].name);
      if (strncmp(name, levels[i].name, len) == 0 && name[len] == '"') found = i;
    }
    if (found == n_levels || (long)levels[found].value != c_value) {
      fprintf(stderr, "    vectors: %s", line);
      fclose(file);
      CHECK(0);
    }
    seen[found]++;
    entries++;
  }
  fclose(file);
  CHECK(entries == (int)n_levels);
  for (size_t i = 0; i < n_levels; i++) CHECK(seen[i] == 1);
  CHECK(FENCELOCK_LOG_OFF == 0);
  /* Most severe first, as thresholds compare. */
  for (size_t i = 1; i < n_levels; i++) CHECK(levels[i].value == levels[i - 1].value + 1);
}
