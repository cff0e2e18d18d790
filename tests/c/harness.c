#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int redis_nodes_start(redis_nodes *nodes, int count) {
  memset(nodes, 0, sizeof *nodes);
  const char *program = getenv("FENCELOCK_REDIS_NODES");
  if (program == NULL) {
    fprintf(stderr, "FENCELOCK_REDIS_NODES is not set: run tests/c/run.sh, which builds redis-nodes\n");
    return -1;
  }
  if (count < 1 || count > HARNESS_MAX_NODES) return -1;
  int to_child[2], from_child[2];
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    execl(program, program, "--nodes", n, (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  nodes->pid = pid;
  nodes->commands = fdopen(to_child[1], "w");
  nodes->replies = fdopen(from_child[0], "r");
  char line[4096];
  if (fgets(line, sizeof line, nodes->replies) == NULL) {
    fprintf(stderr, "redis-nodes printed nothing (is redis-server installed?)\n");
    redis_nodes_stop(nodes);
    return -1;
  }
  /* {"nodes":["redis://127.0.0.1:1234",...]}: take each quoted redis:// URL. */
  for (char *at = strstr(line, "\"redis://"); at != NULL && nodes->count < HARNESS_MAX_NODES;
       at = strstr(at + 1, "\"redis://")) {
    char *end = strchr(at + 1, '"');
    size_t len = (size_t)(end - at - 1);
    if (end == NULL || len >= sizeof nodes->urls[0]) break;
    memcpy(nodes->urls[nodes->count], at + 1, len);
    nodes->urls[nodes->count][len] = '\0';
    nodes->url_list[nodes->count] = nodes->urls[nodes->count];
    nodes->count++;
  }
  return nodes->count == count ? 0 : -1;
}

int redis_nodes_run(redis_nodes *nodes, char *reply, size_t reply_size, const char *format, ...) {
  va_list args;
  va_start(args, format);
  vfprintf(nodes->commands, format, args);
  va_end(args);
  fputc('\n', nodes->commands);
  fflush(nodes->commands);
  char line[4096];
  if (fgets(line, sizeof line, nodes->replies) == NULL) return -1;
  line[strcspn(line, "\n")] = '\0';
  int ok = strncmp(line, "ok", 2) == 0;
  if (reply != NULL && reply_size > 0) {
    const char *text = ok ? line + 2 + (line[2] == ' ') : line;
    snprintf(reply, reply_size, "%s", text);
  }
  return ok ? 0 : -1;
}

void redis_nodes_stop(redis_nodes *nodes) {
  if (nodes->commands != NULL) fclose(nodes->commands);
  if (nodes->replies != NULL) fclose(nodes->replies);
  if (nodes->pid > 0) waitpid(nodes->pid, NULL, 0);
  memset(nodes, 0, sizeof *nodes);
}
