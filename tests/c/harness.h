/*
 * The shared Redis harness, from C: runs the `redis-nodes` program (built
 * from tests/harness) as a child, reads the node URLs it prints, and sends it
 * commands (kill / restart / pause / resume / call) on its stdin. With
 * `--postgres` it runs one PostgreSQL server instead, which takes `sql STATEMENT`.
 */
#ifndef FENCELOCK_TEST_HARNESS_H
#define FENCELOCK_TEST_HARNESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#define HARNESS_MAX_NODES 8

typedef struct redis_nodes {
  pid_t pid;
  FILE *commands; /* its stdin */
  FILE *replies;  /* its stdout */
  int count;
  char urls[HARNESS_MAX_NODES][128]; /* a postgresql:// URL with its user and password fits */
  const char *url_list[HARNESS_MAX_NODES];
  bool copying_stderr;    /* --postgres: its stderr is copied to ours by this thread */
  pthread_t stderr_thread;
} redis_nodes;

/* Starts `count` nodes; the program is $FENCELOCK_REDIS_NODES. 0 on success. */
int redis_nodes_start(redis_nodes *nodes, int count);

/*
 * Starts one PostgreSQL server (`redis-nodes --postgres`): `urls[0]` is its
 * postgresql:// URL. 0 on success; 1 when PostgreSQL is not installed
 * (redis-nodes exited with 77), -1 on any other failure; then `why` holds
 * what redis-nodes said on stderr.
 */
int redis_nodes_start_postgres(redis_nodes *nodes, char *why, size_t why_size);

/*
 * Sends one command line and reads the answer into `reply` (without the
 * leading "ok "). Returns 0 when the harness answered "ok".
 */
int redis_nodes_run(redis_nodes *nodes, char *reply, size_t reply_size, const char *format, ...)
    __attribute__((format(printf, 4, 5)));

/* Stops every node (closing the harness's stdin) and reaps the harness. */
void redis_nodes_stop(redis_nodes *nodes);

#endif
