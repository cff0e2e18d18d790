/*
 * Inventory decrement guarded by a fencelock lock, with the write fenced by
 * the lock's token so a stalled former holder can never overwrite newer stock.
 *
 *   FENCELOCK_NODES=redis://127.0.0.1:6379 ./inventory SKU [DECREMENTS]
 *
 * Several copies may run at once, against one node or several (Redlock):
 * the stock always ends exactly DECREMENTS per copy below its start (100).
 */
#define _POSIX_C_SOURCE 200809L
#include <fencelock.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 16

/* Prints what failed and frees the error. */
static int fail(const char *what, fencelock_status status, fencelock_error *error) {
  fprintf(stderr, "inventory: %s failed (%s): %s\n", what, fencelock_status_name(status),
          error != NULL ? fencelock_error_message(error) : "no detail");
  fencelock_error_free(error);
  return 1;
}

/* Splits FENCELOCK_NODES ("url,url,...") in place. */
static size_t parse_nodes(char *list, const char *urls[]) {
  size_t count = 0;
  for (char *url = strtok(list, ","); url != NULL && count < MAX_NODES; url = strtok(NULL, ",")) urls[count++] = url;
  return count;
}

/* One decrement: lock, read, write with the token, release. */
static int decrement(fencelock_client *client, const char *resource, const char *stock_key) {
  fencelock_lock *lock = NULL;
  fencelock_error *error = NULL;
  fencelock_status status = fencelock_acquire(client, resource, 5000, 30000, &lock, &error);
  if (status != FENCELOCK_STATUS_OK) return fail("acquire", status, error);

  fencelock_fence fence = {0, 0}; /* the fencing token and this grant's holder id */
  fencelock_lock_fence(lock, &fence);
  char *value = NULL;
  uint64_t written_by = 0;
  status = fencelock_fenced_get(client, stock_key, &value, &written_by, &error);
  if (status == FENCELOCK_STATUS_OK) {
    long stock = value != NULL ? atol(value) : 100;
    fencelock_string_free(value);
    char next[32];
    snprintf(next, sizeof next, "%ld", stock - 1);
    /* Refused with FENCELOCK_STATUS_STALE_TOKEN if a newer holder already wrote. */
    status = fencelock_fenced_set_fence(client, stock_key, next, fence, &error);
  }
  int result = status == FENCELOCK_STATUS_OK ? 0 : fail("update stock", status, error);
  fencelock_lock_release(lock, NULL);
  fencelock_lock_free(lock);
  return result;
}

int main(int argc, char **argv) {
  const char *nodes = getenv("FENCELOCK_NODES");
  if (argc < 2 || nodes == NULL) {
    fprintf(stderr, "usage: FENCELOCK_NODES=redis://host:port[,...] %s SKU [DECREMENTS]\n", argv[0]);
    return 2;
  }
  int decrements = argc > 2 ? atoi(argv[2]) : 1;
  char *list = strdup(nodes);
  const char *urls[MAX_NODES];
  size_t count = parse_nodes(list, urls);

  fencelock_client *client = NULL;
  fencelock_error *error = NULL;
  fencelock_status status = fencelock_client_new(urls, count, NULL, &client, &error);
  free(list);
  if (status != FENCELOCK_STATUS_OK) return fail("connect", status, error);

  char resource[256], stock_key[256];
  snprintf(resource, sizeof resource, "inventory:%s", argv[1]);
  snprintf(stock_key, sizeof stock_key, "stock:%s", argv[1]);
  int failures = 0;
  for (int i = 0; i < decrements; i++) failures += decrement(client, resource, stock_key);

  char *value = NULL;
  uint64_t token = 0;
  if (fencelock_fenced_get(client, stock_key, &value, &token, NULL) == FENCELOCK_STATUS_OK && value != NULL) {
    printf("stock of %s: %s (last written with fencing token %llu)\n", argv[1], value, (unsigned long long)token);
  }
  fencelock_string_free(value);
  fencelock_client_free(client);
  return failures == 0 ? 0 : 1;
}
