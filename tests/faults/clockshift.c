/*
 * clockshift: an LD_PRELOAD shim that steps a process's wall clock at run
 * time, for fencelock's fault tests (docs/reliability.md, T10 and T11).
 *
 * The offset, in milliseconds (may be negative), is read from the file named
 * by CLOCKSHIFT_FILE, at most every 10 ms; a missing or empty file means 0.
 * CLOCK_REALTIME (and gettimeofday, time) are shifted. CLOCK_MONOTONIC is
 * left alone unless CLOCKSHIFT_MONOTONIC=1, which shifts it too and so
 * simulates a freeze of the whole process (a GC pause, a VM suspend).
 *
 * Why not libfaketime: under redis-server, jemalloc calls clock_gettime
 * during its own initialisation and libfaketime recurses there. This shim
 * uses raw syscalls only: no malloc, no dlsym, no stdio.
 *
 * Build: gcc -O2 -shared -fPIC -o libclockshift.so clockshift.c
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static long long offset_ms;
static long long last_read_ns;

static int real_clock_gettime(clockid_t clock, struct timespec *ts) {
    return (int)syscall(SYS_clock_gettime, clock, ts);
}

static long long parse_ms(const char *text, long n) {
    long long value = 0;
    int negative = 0;
    long i = 0;
    while (i < n && (text[i] == ' ' || text[i] == '+')) i++;
    if (i < n && text[i] == '-') { negative = 1; i++; }
    for (; i < n && text[i] >= '0' && text[i] <= '9'; i++) value = value * 10 + (text[i] - '0');
    return negative ? -value : value;
}

/* The current offset, re-read from the file at most every 10 ms. */
static long long current_offset_ms(void) {
    struct timespec now;
    real_clock_gettime(CLOCK_MONOTONIC, &now);
    long long now_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    long long last = __atomic_load_n(&last_read_ns, __ATOMIC_RELAXED);
    if (last == 0 || now_ns - last >= 10000000LL) {
        __atomic_store_n(&last_read_ns, now_ns, __ATOMIC_RELAXED);
        const char *path = getenv("CLOCKSHIFT_FILE");
        long long value = 0;
        if (path) {
            int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY);
            if (fd >= 0) {
                char buf[32];
                long n = (long)syscall(SYS_read, fd, buf, sizeof buf);
                syscall(SYS_close, fd);
                if (n > 0) value = parse_ms(buf, n);
            }
        }
        __atomic_store_n(&offset_ms, value, __ATOMIC_RELAXED);
        /* What this thread read: another thread preempted in the middle of an
           older read may store its stale value after ours. */
        return value;
    }
    return __atomic_load_n(&offset_ms, __ATOMIC_RELAXED);
}

static int shifted(clockid_t clock) {
    if (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE) return 1;
    const char *mono = getenv("CLOCKSHIFT_MONOTONIC");
    return mono && mono[0] == '1' &&
           (clock == CLOCK_MONOTONIC || clock == CLOCK_MONOTONIC_COARSE ||
            clock == CLOCK_MONOTONIC_RAW || clock == CLOCK_BOOTTIME);
}

static void add_ms(struct timespec *ts, long long ms) {
    long long ns = (long long)ts->tv_sec * 1000000000LL + ts->tv_nsec + ms * 1000000LL;
    ts->tv_sec = (time_t)(ns / 1000000000LL);
    ts->tv_nsec = (long)(ns % 1000000000LL);
    if (ts->tv_nsec < 0) { ts->tv_nsec += 1000000000L; ts->tv_sec -= 1; }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int result = real_clock_gettime(clock, ts);
    if (result == 0 && shifted(clock)) add_ms(ts, current_offset_ms());
    return result;
}

/* glibc declares tv non-null, but callers do pass NULL; keep the check. */
#pragma GCC diagnostic ignored "-Wnonnull-compare"
int gettimeofday(struct timeval *tv, void *tz) {
    (void)tz;
    struct timespec ts;
    int result = clock_gettime(CLOCK_REALTIME, &ts);
    if (result == 0 && tv) {
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return result;
}

time_t time(time_t *out) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (out) *out = ts.tv_sec;
    return ts.tv_sec;
}
