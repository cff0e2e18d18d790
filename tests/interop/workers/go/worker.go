// Interop worker (Go front): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical
// section. FENCELOCK_INTEROP_TAKE (see worker.py) says what it takes
// instead: `elect` campaigns (announcing "go", also FENCELOCK_INTEROP_ELECT=1;
// the leadership's fencing token is the epoch), `permits:K` a permit (logged
// as a fifth field, the counter untouched), `rw` reads (even iterations,
// `r`) and writes (odd, `w`). FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set
// (not empty), is the per-node timeout in milliseconds (anything else fails
// the worker).
//
//	worker NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	fencelock "github.com/fencelock/fencelock/bindings/go"
)

func fail(what string, err error) {
	fmt.Fprintf(os.Stderr, "go worker: %s: %v\n", what, err)
	os.Exit(1)
}

func main() {
	if len(os.Args) != 6 {
		os.Exit(2)
	}
	resource, counter, logFile := os.Args[2], os.Args[4], os.Args[5]
	iterations, _ := strconv.Atoi(os.Args[3])
	var options []fencelock.Option
	if value := os.Getenv("FENCELOCK_INTEROP_NODE_TIMEOUT_MS"); value != "" {
		ms, err := strconv.Atoi(value)
		if err != nil {
			fail("FENCELOCK_INTEROP_NODE_TIMEOUT_MS", err)
		}
		options = append(options, fencelock.WithNodeTimeout(time.Duration(ms)*time.Millisecond))
	}
	client, err := fencelock.NewClient(strings.Split(os.Args[1], ","), options...)
	if err != nil {
		fail("connect", err)
	}
	defer client.Close()
	mode := os.Getenv("FENCELOCK_INTEROP_TAKE")
	if os.Getenv("FENCELOCK_INTEROP_ELECT") == "1" {
		mode = "elect"
	}
	if mode == "" {
		mode = "lock"
	}
	ctx := context.Background()
	const ttl, wait = 10 * time.Second, 120 * time.Second
	for i := 0; i < iterations; i++ {
		var lock *fencelock.Lock
		writes, extra := true, ""
		switch {
		case mode == "elect":
			var leadership *fencelock.Leadership
			leadership, err = client.Campaign(ctx, resource, ttl, []byte("go"), fencelock.WithWait(wait))
			if leadership != nil {
				lock = leadership.Lock
			}
		case strings.HasPrefix(mode, "permits:"):
			permits, _ := strconv.Atoi(strings.TrimPrefix(mode, "permits:"))
			lock, err = client.Semaphore(resource, permits).Acquire(ctx, ttl, fencelock.WithWait(wait))
			writes = false
		case mode == "rw":
			rw := client.RWLock(resource)
			writes = i%2 == 1
			if writes {
				lock, err = rw.AcquireWrite(ctx, ttl, fencelock.WithWait(wait))
				extra = " w"
			} else {
				lock, err = rw.AcquireRead(ctx, ttl, fencelock.WithWait(wait))
				extra = " r"
			}
		default:
			lock, err = client.Acquire(ctx, resource, ttl, fencelock.WithWait(wait))
		}
		if err != nil {
			fail("acquire", err)
		}
		if permit, ok := lock.Permit(); ok {
			extra = " " + strconv.Itoa(permit)
		}
		start := time.Now().UnixNano()
		value := 0
		if data, err := os.ReadFile(counter); err == nil {
			value, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		time.Sleep(3 * time.Millisecond) // widen the window a lost update needs
		if writes {
			if err := os.WriteFile(counter, []byte(strconv.Itoa(value+1)+"\n"), 0o644); err != nil {
				fail("write the counter", err)
			}
		}
		line := fmt.Sprintf("go %d %d %d%s\n", lock.FencingToken(), start, time.Now().UnixNano(), extra)
		log, err := os.OpenFile(logFile, os.O_APPEND|os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			fail("open the log", err)
		}
		_, err = log.WriteString(line)
		log.Close()
		if err != nil {
			fail("write the log", err)
		}
		if err := lock.Release(ctx); err != nil {
			fail("release", err)
		}
	}
}
