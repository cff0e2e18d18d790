#define _GNU_SOURCE
#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * Runs redis-nodes with `arg1 arg2` and reads its first line into `line`.
 * With `stderr_fd` non-NULL its stderr goes to a pipe whose reading end is
 * stored there. 0 when a line came.
 */
static int start_harness(redis_nodes *nodes, const char *arg1, const char *arg2, int *stderr_fd, char *line,
                         size_t line_size) {
  memset(nodes, 0, sizeof *nodes);
  const char *program = getenv("FENCELOCK_REDIS_NODES");
  if (program == NULL) {
    fprintf(stderr, "FENCELOCK_REDIS_NODES is not set: run tests/c/run.sh, which builds redis-nodes\n");
    return -1;
  }
  int to_child[2], from_child[2], errors[2] = {-1, -1};
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) return -1;
  if (stderr_fd != NULL && pipe2(errors, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    if (stderr_fd != NULL) dup2(errors[1], STDERR_FILENO);
    execl(program, program, arg1, arg2, (char *)NULL);
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  if (stderr_fd != NULL) {
    close(errors[1]);
    *stderr_fd = errors[0];
  }
  nodes->pid = pid;
  nodes->commands = fdopen(to_child[1], "w");
  nodes->replies = fdopen(from_child[0], "r");
  return fgets(line, (int)line_size, nodes->replies) == NULL ? -1 : 0;
}

/* Takes each quoted URL starting with `scheme` from the harness's first line. */
static void take_urls(redis_nodes *nodes, char *line, const char *scheme) {
  char quoted[32];
  snprintf(quoted, sizeof quoted, "\"%s", scheme);
  for (char *at = strstr(line, quoted); at != NULL && nodes->count < HARNESS_MAX_NODES;
       at = strstr(at + 1, quoted)) {
    char *end = strchr(at + 1, '"');
    if (end == NULL || (size_t)(end - at - 1) >= sizeof nodes->urls[0]) break;
    size_t len = (size_t)(end - at - 1);
    memcpy(nodes->urls[nodes->count], at + 1, len);
    nodes->urls[nodes->count][len] = '\0';
    nodes->url_list[nodes->count] = nodes->urls[nodes->count];
    nodes->count++;
  }
}

int redis_nodes_start(redis_nodes *nodes, int count) {
  if (count < 1 || count > HARNESS_MAX_NODES) return -1;
  char n[16];
  snprintf(n, sizeof n, "%d", count);
  char line[4096];
  if (start_harness(nodes, "--nodes", n, NULL, line, sizeof line) != 0) {
    fprintf(stderr, "redis-nodes printed nothing (is redis-server installed?)\n");
    redis_nodes_stop(nodes);
    return -1;
  }
  /* {"nodes":["redis://127.0.0.1:1234",...]}: take each quoted redis:// URL. */
  take_urls(nodes, line, "redis://");
  return nodes->count == count ? 0 : -1;
}

/* Copies the harness's stderr to ours until it ends (the harness exited). */
static void *copy_stderr(void *fd) {
  char buffer[4096];
  ssize_t n;
  while ((n = read((int)(intptr_t)fd, buffer, sizeof buffer)) > 0) {
    if (write(STDERR_FILENO, buffer, (size_t)n) < 0) break;
  }
  close((int)(intptr_t)fd);
  return NULL;
}

int redis_nodes_start_postgres(redis_nodes *nodes, char *why, size_t why_size) {
  int errors = -1;
  char line[4096];
  int started = start_harness(nodes, "--postgres", NULL, &errors, line, sizeof line);
  if (started == 0) take_urls(nodes, line, "postgresql://");
  if (started == 0 && nodes->count == 1) {
    if (pthread_create(&nodes->stderr_thread, NULL, copy_stderr, (void *)(intptr_t)errors) == 0) {
      nodes->copying_stderr = true;
    } else {
      close(errors);
    }
    return 0;
  }
  /* It exited (or said something else): what it wrote on stderr says why. */
  int status = 0;
  if (nodes->commands != NULL) fclose(nodes->commands);
  nodes->commands = NULL;
  if (nodes->pid > 0) waitpid(nodes->pid, &status, 0);
  nodes->pid = 0;
  size_t used = (size_t)snprintf(why, why_size, "redis-nodes --postgres did not start (exit status %d): %s",
                                 WIFEXITED(status) ? WEXITSTATUS(status) : -1, started == 0 ? line : "");
  if (errors >= 0) {
    ssize_t n;
    while (used + 1 < why_size && (n = read(errors, why + used, why_size - used - 1)) > 0) used += (size_t)n;
    if (used < why_size) why[used] = '\0';
    close(errors);
  }
  /* One line: the reason is printed after "skip NAME: ". */
  for (char *c = why; *c != '\0'; c++) {
    if (*c == '\n') *c = ' ';
  }
  redis_nodes_stop(nodes);
  /* 77: PostgreSQL is not installed, the one reason its tests skip. */
  return WIFEXITED(status) && WEXITSTATUS(status) == 77 ? 1 : -1;
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
  if (nodes->copying_stderr) pthread_join(nodes->stderr_thread, NULL);
  memset(nodes, 0, sizeof *nodes);
}
