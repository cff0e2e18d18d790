/*
 * The shared Redis harness, from C: runs the `redis-nodes` program (built
 * from tests/harness) as a child, reads the node URLs it prints, and sends it
 * commands (kill / restart / pause / resume / call) on its stdin.
 */
#ifndef FENCELOCK_TEST_HARNESS_H
#define FENCELOCK_TEST_HARNESS_H

#include <stdio.h>
#include <sys/types.h>

#define HARNESS_MAX_NODES 8

typedef struct redis_nodes {
  pid_t pid;
  FILE *commands; /* its stdin */
  FILE *replies;  /* its stdout */
  int count;
  char urls[HARNESS_MAX_NODES][64];
  const char *url_list[HARNESS_MAX_NODES];
} redis_nodes;

/* Starts `count` nodes; the program is $FENCELOCK_REDIS_NODES. 0 on success. */
int redis_nodes_start(redis_nodes *nodes, int count);

/*
 * Sends one command line and reads the answer into `reply` (without the
 * leading "ok "). Returns 0 when the harness answered "ok".
 */
int redis_nodes_run(redis_nodes *nodes, char *reply, size_t reply_size, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* Stops every node (closing the harness's stdin) and reaps the harness. */
void redis_nodes_stop(redis_nodes *nodes);

#endif
