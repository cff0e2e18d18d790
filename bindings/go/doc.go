// Package fencelock is the Go front of fencelock: distributed locks over
// Redis (one node, or Redlock over N independent masters) or PostgreSQL,
// with automatic renewal, a signal when a lock is lost, and fencing tokens
// that rise strictly per resource. It drives the same Rust core as the
// Rust, C, Python, Node and .NET fronts (through the C ABI, with cgo), so a
// Go service and a Python worker contend for one lock and see one sequence
// of tokens.
//
//	client, err := fencelock.NewClient([]string{"redis://127.0.0.1:6379"})
//	if err != nil { … }
//	defer client.Close()
//
//	lock, err := client.Acquire(ctx, "invoice:42", 10*time.Second)
//	if err != nil { … } // ctx ended (wraps ctx.Err()), ErrUnavailable, …
//	defer lock.Release(context.Background())
//
//	// Send the fence with every write; storage refuses older ones.
//	err = client.FencedSet(ctx, "invoice:42:state", "paid", lock.Fence())
//
// Waiting: Acquire waits while another owner holds the lock, until ctx ends
// (then nothing is left held or queued) or for WithWait; a ctx deadline
// bounds the wait as WithWait does, so the waiter has left the queue when
// Acquire returns (up to about two node timeouts after the deadline), where
// a cancelled ctx leaves it in the background (a release made at once may
// be handed to the waiter that is going, and pass on about a round trip
// later); TryAcquire makes
// one attempt and returns an error matching ErrNotAcquired when the lock is
// held elsewhere. Waits are cancelled inside the library (its _async calls
// and fencelock_operation_cancel): no goroutine or thread stays blocked.
// Every call that takes a ctx honours it while it runs, reads included
// (FencedGet, Semaphore.Holders, Inspect), and so does connecting with
// NewClientContext.
//
// Losing a lock: a held Lock is renewed at a third of its ttl. Lost returns
// a channel that receives the LossReason (deleted, taken_over, unreachable,
// expired) and is closed once the lock is lost; IsHeld and Remaining read
// the local monotonic clock.
//
// Errors are *Error values with a Kind from the table every front shares
// (docs/protocol.md §7), a message, and per-node reports. Test them with
// errors.Is and the sentinels (ErrNotAcquired, ErrTimeout, ErrUnavailable,
// ErrLost, ErrNotHeld, ErrStaleToken, ErrInvalidArgument, ErrConfig,
// ErrAuth, ErrTLS, ErrClosed, ErrCancelled, …). Bad input (an empty or
// oversized name, a ttl outside Limits, a string with a NUL byte, which a C
// string cannot carry) is refused with ErrInvalidArgument, never truncated
// and never a panic.
//
// Also: Client.Semaphore (counting semaphores; each permit is a *Lock),
// Client.RWLock (readers share, a writer excludes), Client.Campaign and
// Client.Observe (leader election), Client.Metrics, Client.Inspect (each
// node's view of a lock, for operators: held, ttl, fencing counter, live
// waiters), and ForwardLogs (the library's log records to a log/slog
// handler).
//
// Memory: every native object has one owner in Go. Close a Client and an
// Observation, Release a Lock; a value dropped without it is freed when
// garbage-collected (runtime.AddCleanup), a safety net only (a lock then
// stops renewing and expires at its ttl). Callbacks from the library reach
// Go through runtime/cgo.Handle values, never Go pointers kept in C.
//
// Building: the module links the static library libfencelock.a from
// lib/GOOS-GOARCH/ inside the module, with the header in lib/include/;
// build-lib.sh builds both from the repository (cargo build --release
// --target <host> -p fencelock-ffi) and copies them there.
package fencelock
