/*
 * The shared protocol vectors (tests/vectors/protocol.json, path in
 * $FENCELOCK_VECTORS): key names on a real node, invalid resources, and the
 * tables every front shares (error kinds, limits, the metrics' latency
 * buckets) against this header and library.
 */
#define _GNU_SOURCE
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Copies the string value of "field" in one JSON line (the vectors file keeps
 * one object per line and no escapes). Returns 0 when found. */
static int json_string(const char *line, const char *field, char *out, size_t size) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\": \"", field);
  const char *start = strstr(line, pattern);
  if (start == NULL) return -1;
  start += strlen(pattern);
  const char *end = strchr(start, '"');
  if (end == NULL || (size_t)(end - start) >= size) return -1;
  memcpy(out, start, (size_t)(end - start));
  out[end - start] = '\0';
  return 0;
}

/* The number after "field": in one JSON line, or `missing` when absent. */
static double json_number(const char *line, const char *field, double missing) {
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\": ", field);
  const char *start = strstr(line, pattern);
  return start == NULL ? missing : strtod(start + strlen(pattern), NULL);
}

/* The metrics' latency buckets of the vectors (seconds) are this library's
 * bounds (nanoseconds), as many as the header says. */
static void check_latency_buckets(const char *line, int *buckets_checked) {
  const char *field = "\"latency_buckets_seconds\": [";
  const char *at = strstr(line, field);
  CHECK(at != NULL);
  at += strlen(field);
  const uint64_t *bounds = fencelock_latency_buckets();
  int n = 0;
  for (char *end;; at = end + 1) {
    double seconds = strtod(at, &end);
    CHECK(end != at && n < FENCELOCK_LATENCY_BUCKET_COUNT);
    CHECK(bounds[n] == (uint64_t)llround(seconds * 1e9));
    n++;
    if (*end == ']') break;
    CHECK(*end == ',');
  }
  CHECK(n == FENCELOCK_LATENCY_BUCKET_COUNT);
  CHECK(bounds[0] == 500000 && bounds[n - 1] == 10000000000ULL);
  for (int i = 1; i < n; i++) CHECK(bounds[i] > bounds[i - 1]);
  (*buckets_checked)++;
}

/* The error kinds and limits of the vectors are this header's and library's. */
static void check_shared_tables(const char *line, int *kinds_checked, int *limits_checked) {
  char c_status[64];
  if (json_string(line, "c_status", c_status, sizeof c_status) == 0) {
    int code = (int)json_number(line, "code", -1);
    CHECK(strcmp(fencelock_status_name(code), c_status) == 0);
    (*kinds_checked)++;
  } else if (strstr(line, "\"limits\"") != NULL) {
    const fencelock_limits *limits = fencelock_get_limits();
    CHECK(limits->min_ttl_ms == FENCELOCK_MIN_TTL_MS && limits->max_ttl_ms == FENCELOCK_MAX_TTL_MS);
    CHECK(limits->max_wait_ms == FENCELOCK_MAX_WAIT_MS && limits->max_resource_bytes == FENCELOCK_MAX_RESOURCE_BYTES);
    CHECK(limits->max_prefix_bytes == FENCELOCK_MAX_PREFIX_BYTES);
    CHECK(limits->max_fencing_token == FENCELOCK_MAX_FENCING_TOKEN && limits->max_holder_id == FENCELOCK_MAX_HOLDER_ID);
    CHECK(limits->max_drift_factor == FENCELOCK_MAX_DRIFT_FACTOR);
    CHECK(limits->max_leader_value_bytes == FENCELOCK_MAX_LEADER_VALUE_BYTES);
    CHECK(limits->max_permits == FENCELOCK_MAX_PERMITS);
    /* Doubles hold these exactly except the holder id (2^63 - 1 rounds to 2^63). */
    CHECK(json_number(line, "min_ttl_ms", 0) == FENCELOCK_MIN_TTL_MS);
    CHECK(json_number(line, "max_ttl_ms", 0) == FENCELOCK_MAX_TTL_MS);
    CHECK(json_number(line, "max_wait_ms", 0) == FENCELOCK_MAX_WAIT_MS);
    CHECK(json_number(line, "max_resource_bytes", 0) == FENCELOCK_MAX_RESOURCE_BYTES);
    CHECK(json_number(line, "max_prefix_bytes", 0) == FENCELOCK_MAX_PREFIX_BYTES);
    CHECK(json_number(line, "max_fencing_token", 0) == FENCELOCK_MAX_FENCING_TOKEN);
    CHECK(json_number(line, "max_holder_id", 0) == (double)FENCELOCK_MAX_HOLDER_ID);
    CHECK(json_number(line, "max_drift_factor", 0) == FENCELOCK_MAX_DRIFT_FACTOR);
    CHECK(json_number(line, "max_leader_value_bytes", 0) == FENCELOCK_MAX_LEADER_VALUE_BYTES);
    CHECK(json_number(line, "max_permits", 0) == FENCELOCK_MAX_PERMITS);
    (*limits_checked)++;
  }
}

void test_protocol_vectors(void) {
  const char *path = getenv("FENCELOCK_VECTORS");
  CHECK(path != NULL);
  FILE *file = fopen(path, "r");
  CHECK(file != NULL);
  char line[2048];
  int keys_checked = 0, invalid_checked = 0, kinds_checked = 0, limits_checked = 0, buckets_checked = 0;
  while (fgets(line, sizeof line, file) != NULL) {
    check_shared_tables(line, &kinds_checked, &limits_checked);
    if (strstr(line, "\"metrics\": {") != NULL) check_latency_buckets(line, &buckets_checked);
    char prefix[64], resource[128], lock_key[256], fence_key[256];
    if (json_string(line, "lock_key", lock_key, sizeof lock_key) == 0) {
      CHECK(json_string(line, "prefix", prefix, sizeof prefix) == 0);
      CHECK(json_string(line, "resource", resource, sizeof resource) == 0);
      CHECK(json_string(line, "fence_key", fence_key, sizeof fence_key) == 0);
      fencelock_options *options = NULL;
      fencelock_client *client = NULL;
      fencelock_lock *lock = NULL;
      CHECK_STATUS(fencelock_options_new(&options), FENCELOCK_STATUS_OK);
      CHECK_STATUS(fencelock_options_set_key_prefix(options, prefix), FENCELOCK_STATUS_OK);
      CHECK_STATUS(fencelock_client_new(single.url_list, 1, options, &client, NULL), FENCELOCK_STATUS_OK);
      fencelock_options_free(options);
      CHECK_STATUS(fencelock_acquire(client, resource, 5000, 2000, &lock, NULL), FENCELOCK_STATUS_OK);
      uint64_t token = 0;
      CHECK_STATUS(fencelock_lock_fencing_token(lock, &token), FENCELOCK_STATUS_OK);
      char command[512], expected[32];
      snprintf(command, sizeof command, "GET %s", lock_key);
      const char *owner = redis(&single, 0, command);
      CHECK(strlen(owner) == 32 && strspn(owner, "0123456789abcdef") == 32);
      snprintf(command, sizeof command, "GET %s", fence_key);
      snprintf(expected, sizeof expected, "%llu", (unsigned long long)token);
      CHECK(strcmp(redis(&single, 0, command), expected) == 0);
      CHECK_STATUS(fencelock_lock_release(lock, NULL), FENCELOCK_STATUS_OK);
      fencelock_lock_free(lock);
      fencelock_client_free(client);
      keys_checked++;
    } else if (strstr(line, "\"why\"") != NULL && strstr(line, "\"script\"") == NULL) {
      /* invalid_resources: a literal resource, or one letter repeated. */
      static char invalid[4096];
      char letter[8];
      if (json_string(line, "resource_repeat", letter, sizeof letter) == 0) {
        const char *times = strstr(line, "\"times\": ");
        CHECK(times != NULL);
        size_t n = (size_t)atol(times + strlen("\"times\": "));
        CHECK(n < sizeof invalid);
        memset(invalid, letter[0], n);
        invalid[n] = '\0';
      } else {
        CHECK(json_string(line, "resource", invalid, sizeof invalid) == 0);
      }
      fencelock_client *client = connect_to(&single);
      fencelock_lock *lock = NULL;
      CHECK_STATUS(fencelock_try_acquire(client, invalid, 1000, &lock, NULL), FENCELOCK_STATUS_INVALID_ARGUMENT);
      fencelock_client_free(client);
      invalid_checked++;
    }
  }
  fclose(file);
  CHECK(keys_checked >= 6 && invalid_checked >= 3);
  CHECK(kinds_checked >= 13 && limits_checked == 1 && buckets_checked == 1);
}
