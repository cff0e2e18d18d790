/*
 * The client and its options, with no lock work to speak of: version and
 * status names, options and the client's life cycle, the TLS minimum
 * version option, and bad arguments to every call (reliability.md T21).
 */
#define _GNU_SOURCE
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void test_version_matches_header(void) {
  CHECK(strcmp(fencelock_version(), FENCELOCK_VERSION) == 0);
}

void test_status_names(void) {
  CHECK(strcmp(fencelock_status_name(FENCELOCK_STATUS_NOT_ACQUIRED), "FENCELOCK_STATUS_NOT_ACQUIRED") == 0);
  CHECK(strcmp(fencelock_status_name(FENCELOCK_STATUS_OK), "FENCELOCK_STATUS_OK") == 0);
  CHECK(strcmp(fencelock_status_name(12345), "FENCELOCK_STATUS_UNKNOWN") == 0);
  CHECK(strcmp(fencelock_status_name(-1), "FENCELOCK_STATUS_UNKNOWN") == 0);
}

void test_client_lifecycle_with_options(void) {
  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "ctest:"), FENCELOCK_STATUS_OK);
  /* The suite's first acquire: under valgrind its code runs for the first time, slowly. */
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_connect_timeout_ms(options, 2000), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_drift_factor(options, 0.02), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_retry_ms(options, 5, 50), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_auto_renew(options, true), FENCELOCK_STATUS_OK);
  fencelock_client *client = NULL;
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
  fencelock_options_free(options);
  CHECK(client != NULL);

  const char *resource = unique("prefix");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "EXISTS ctest:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);

  /* free(NULL) is a no-op for every type. */
  fencelock_client_free(NULL);
  fencelock_lock_free(NULL);
  fencelock_options_free(NULL);
  fencelock_error_free(NULL);
  fencelock_operation_free(NULL);
  fencelock_string_free(NULL);
  fencelock_event_clear(NULL);
}

/* reliability.md T21: bad input gets a documented status, never a crash. */
void test_bad_client_arguments(void) {
  fencelock_client *client = (fencelock_client *)0x1;
  fencelock_error *error = NULL;
  const char *null_url[] = {NULL};
  CHECK_STATUS(fencelock_client_new(NULL, 1, NULL, &client, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(null_url, 1, NULL, &client, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_new(single.url_list, 0, NULL, &client, &error), FENCELOCK_STATUS_CONFIG);
  CHECK(strlen(fencelock_error_message(error)) > 0);
  fencelock_error_free(error);
  error = NULL;
  const char *bad[] = {"not a url"};
  CHECK_STATUS(fencelock_client_new(bad, 1, NULL, &client, &error), FENCELOCK_STATUS_CONFIG);
  CHECK(strstr(fencelock_error_message(error), "not a url") != NULL);
  fencelock_error_free(error);
  const char *http[] = {"http://127.0.0.1:1"};
  CHECK_STATUS(fencelock_client_new(http, 1, NULL, &client, NULL), FENCELOCK_STATUS_CONFIG);
  const char *twice[] = {single.urls[0], single.urls[0]};
  CHECK_STATUS(fencelock_client_new(twice, 2, NULL, &client, NULL), FENCELOCK_STATUS_CONFIG);
  const char *bad_utf8[] = {"redis://127.0.0.1:1/\xff"};
  CHECK_STATUS(fencelock_client_new(bad_utf8, 1, NULL, &client, NULL), FENCELOCK_STATUS_INVALID_UTF8);

  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(NULL, 5), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "\xc3\x28"), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_options_set_tls_ca_pem(options, NULL, 10), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 0), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_CONFIG);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, 100), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_drift_factor(options, NAN), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_CONFIG);
  fencelock_options_free(options);
  CHECK(client == (fencelock_client *)0x1); /* never written on failure */

  CHECK(fencelock_error_status(NULL) == FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(fencelock_error_message(NULL) == NULL);
  CHECK(fencelock_error_node_count(NULL) == 0);
  CHECK_STATUS(fencelock_error_node(NULL, 0, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
}

void test_tls_min_version_option(void) {
  CHECK_STATUS(fencelock_options_set_tls_min_version(NULL, FENCELOCK_TLS_VERSION_1_3), FENCELOCK_STATUS_NULL_ARGUMENT);
  fencelock_options *options = NULL;
  CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_2), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_3), FENCELOCK_STATUS_OK);
  CHECK(FENCELOCK_TLS_VERSION_1_2 == 12 && FENCELOCK_TLS_VERSION_1_3 == 13); /* stable values */
  const int32_t bad[] = {11, 14, -1, 0, 1, 3, 10, 120, INT32_MIN, INT32_MAX};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_STATUS(fencelock_options_set_tls_min_version(options, bad[i]), FENCELOCK_STATUS_INVALID_ARGUMENT);
  }
  CHECK_STATUS(fencelock_options_set_tls_min_version(NULL, 14), FENCELOCK_STATUS_NULL_ARGUMENT);

  /* The 1.3 minimum reached the client, and the refused values above left it
     in place: a TLS 1.3 minimum cannot be applied to a Redis Cluster. */
  const char *cluster[] = {"rediss+cluster://127.0.0.1:1"};
  fencelock_client *client = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_client_new(cluster, 1, options, &client, &error), FENCELOCK_STATUS_CONFIG);
  const char *message = fencelock_error_message(error);
  CHECK(message != NULL && strstr(message, "tls-protocols") != NULL);
  fencelock_error_free(error);
  CHECK(client == NULL);

  /* Back to 1.2 (the default), with a key prefix; a refused value in between
     changes neither. Plain redis:// nodes ignore the TLS minimum. */
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, FENCELOCK_TLS_VERSION_1_2), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_key_prefix(options, "ctls:"), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_options_set_tls_min_version(options, 11), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_options_set_node_timeout_ms(options, GENEROUS_NODE_TIMEOUT_MS), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
  fencelock_options_free(options);
  const char *resource = unique("tls-min");
  fencelock_lock *lock = NULL;
  CHECK_STATUS(fencelock_acquire(client, resource, 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  char command[256];
  snprintf(command, sizeof command, "EXISTS ctls:{%s}", resource);
  CHECK(strcmp(redis(&single, 0, command), "1") == 0);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}

static void on_done_never(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  (void)user_data;
  (void)status;
  (void)lock;
  (void)error;
  fprintf(stderr, "    callback called for a call that failed at once\n");
  abort();
}

void test_bad_lock_arguments(void) {
  fencelock_client *client = connect_to(&single);
  CHECK(client != NULL);
  fencelock_lock *lock = NULL;
  fencelock_error *error = NULL;
  CHECK_STATUS(fencelock_acquire(NULL, "r", 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, NULL, 1000, 0, &lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", 1000, 0, NULL, &error), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(strstr(fencelock_error_message(error), "out") != NULL);
  fencelock_error_free(error);
  CHECK_STATUS(fencelock_acquire(client, "", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  char huge[5000];
  memset(huge, 'a', sizeof huge - 1);
  huge[sizeof huge - 1] = '\0';
  CHECK_STATUS(fencelock_acquire(client, huge, 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "bad\xff\xfe", 1000, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_UTF8);
  CHECK_STATUS(fencelock_acquire(client, "r", 0, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", UINT64_MAX, 0, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", (uint64_t)INT32_MAX + 1, 0, &lock, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire(client, "r", 1000, UINT64_MAX, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_try_acquire(client, "", 1000, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, "r", 1000, 0, NULL, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  /* The async variants refuse bad arguments at once; the callback is never called. */
  CHECK_STATUS(fencelock_acquire_async(client, "", 1000, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, "r", 0, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_acquire_async(client, huge, 1000, 0, on_done_never, NULL, NULL, NULL),
               FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release_async(NULL, on_done, NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(lock == NULL);

  uint64_t value = 0;
  bool held = false;
  CHECK_STATUS(fencelock_lock_fencing_token(NULL, &value), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_is_held(NULL, &held), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_remaining_ms(NULL, &value), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(NULL, 1000, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release(NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK(fencelock_lock_resource(NULL) == NULL);
  CHECK_STATUS(fencelock_operation_cancel(NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_next_event(NULL, 0, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_next_event(client, 0, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_client_set_event_callback(NULL, NULL, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set(client, "", "v", 1, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_fenced_set(client, "k", NULL, 1, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);

  CHECK_STATUS(fencelock_acquire(client, unique("ttl"), 1000, 0, &lock, NULL), FENCELOCK_STATUS_OK);
  CHECK_STATUS(fencelock_lock_fencing_token(lock, NULL), FENCELOCK_STATUS_NULL_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(lock, 0, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend(lock, UINT64_MAX, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_extend_async(lock, 0, on_done, NULL, NULL, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
  CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
  fencelock_lock_free(lock);
  fencelock_client_free(client);
}
