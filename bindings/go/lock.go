package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"runtime/cgo"
	"sync"
	"time"
)

// LockOption adjusts one acquire (of a lock, a permit, a read or write
// grant or a leadership).
type LockOption func(*lockConfig)

type lockConfig struct {
	wait        *time.Duration
	fair        bool
	autoRenew   *bool
	maxHold     *time.Duration
	maxRenewals *int
}

// WithWait bounds how long the acquire waits while the lock is held
// elsewhere: it then fails with ErrTimeout (0: one attempt, failing with
// ErrNotAcquired). Without it, the acquire waits until its context ends (up
// to Limits.MaxWait).
func WithWait(wait time.Duration) LockOption {
	return func(c *lockConfig) { c.wait = &wait }
}

// WithFair makes the acquire wait in line (FIFO): it never takes the lock
// ahead of an earlier waiter, even when the lock is free at the moment it
// asks. Without it, waiters are still woken in arrival order, but a
// newcomer may take a free lock.
func WithFair() LockOption {
	return func(c *lockConfig) { c.fair = true }
}

// LockAutoRenew turns automatic renewal of this lock on or off (default:
// the client's, on). Off gives a fixed lease that ends at its ttl unless
// extended; the lock is then lost with LossExpired.
func LockAutoRenew(on bool) LockOption {
	return func(c *lockConfig) { c.autoRenew = &on }
}

// WithMaxHold stops renewal so the lock is held no longer than d in all;
// it then expires and is lost with LossExpired.
func WithMaxHold(d time.Duration) LockOption {
	return func(c *lockConfig) { c.maxHold = &d }
}

// WithMaxRenewals stops renewal after n renewals.
func WithMaxRenewals(n int) LockOption {
	return func(c *lockConfig) { c.maxRenewals = &n }
}

// nativeLockOptions builds the C options of one acquire under ctx; try
// forces one attempt. The caller frees them (the acquire copies what it
// needs). It reports whether ctx's deadline bounds the wait (see
// waitWithin).
func nativeLockOptions(ctx context.Context, ttl time.Duration, opts []LockOption, try bool) (*C.fencelock_lock_options, bool, *Error) {
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return nil, false, err
	}
	var config lockConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&config)
		}
	}
	wait := limits.MaxWait // until the context ends
	if config.wait != nil {
		wait = *config.wait
	}
	if try {
		wait = 0
	}
	waitMs, err := waitMillis(wait)
	if err != nil {
		return nil, false, err
	}
	waitMs, deadlineBound := waitWithin(ctx, waitMs)
	var maxHoldMs uint64
	if config.maxHold != nil {
		if *config.maxHold <= 0 {
			return nil, false, newError(KindInvalidArgument, "max hold %v must be positive", *config.maxHold)
		}
		maxHoldMs = uint64(*config.maxHold / time.Millisecond)
	}
	if config.maxRenewals != nil && (*config.maxRenewals < 0 || *config.maxRenewals > math.MaxUint32) {
		return nil, false, newError(KindInvalidArgument, "max renewals %d is out of range: give 0 to %d", *config.maxRenewals, uint32(math.MaxUint32))
	}
	var o *C.fencelock_lock_options
	if C.fencelock_lock_options_new(C.uint64_t(ttlMs), &o) != C.FENCELOCK_STATUS_OK {
		return nil, false, newError(KindInternal, "could not create lock options")
	}
	C.fencelock_lock_options_set_wait_ms(o, C.uint64_t(waitMs))
	C.fencelock_lock_options_set_fair(o, C.bool(config.fair))
	if config.autoRenew != nil {
		C.fencelock_lock_options_set_auto_renew(o, C.bool(*config.autoRenew))
	}
	if config.maxHold != nil {
		C.fencelock_lock_options_set_max_hold_ms(o, C.uint64_t(maxHoldMs))
	}
	if config.maxRenewals != nil {
		C.fencelock_lock_options_set_max_renewals(o, C.uint32_t(*config.maxRenewals))
	}
	return o, deadlineBound, nil
}

// beginAcquire starts one native acquire with these options.
type beginAcquire func(client *C.fencelock_client, name *C.char, options *C.fencelock_lock_options,
	handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) C.fencelock_status

// acquire runs one acquire of any kind: checks the arguments, starts the
// native call, waits for it or for ctx (cancelling it), and wraps the lock.
func (c *Client) acquire(ctx context.Context, what, name string, ttl time.Duration, opts []LockOption, try bool, begin beginAcquire) (*Lock, error) {
	if err := checkName(what, name); err != nil {
		return nil, err
	}
	options, deadlineBound, err := nativeLockOptions(ctx, ttl, opts, try)
	if err != nil {
		return nil, err
	}
	defer C.fencelock_lock_options_free(options)
	cname := cString(name)
	defer freeCString(cname)
	return c.finishAcquire(ctx, what, name, deadlineBound, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return c.use(func(client *C.fencelock_client) *Error {
			return started(begin(client, cname, options, handle, op, cerr), *cerr)
		})
	})
}

// waitWithin cuts an acquire's wait (in milliseconds) to ctx's deadline,
// rounded up so that it does not run out before ctx does, and reports
// whether it did. A waiter whose wait runs out leaves every queue before
// the acquire returns, so that a release the caller makes next is not
// handed to it; one whose ctx is cancelled leaves in the background. A
// deadline is a wait bound known in advance, so it takes the first path.
func waitWithin(ctx context.Context, waitMs uint64) (uint64, bool) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return waitMs, false
	}
	left := max(time.Until(deadline), 0)
	leftMs := uint64((left + time.Millisecond - 1) / time.Millisecond)
	if leftMs >= waitMs {
		return waitMs, false
	}
	return leftMs, true
}

// finishAcquire runs a started acquire to its end and wraps the lock.
// deadlineBound: its wait was cut to ctx's deadline (waitWithin), so it is
// left to end by itself then, and its running out is ctx's.
func (c *Client) finishAcquire(ctx context.Context, what, name string, deadlineBound bool, start starter) (*Lock, error) {
	runAcquire := run[acquireResult]
	if deadlineBound {
		runAcquire = boundedByDeadline[acquireResult]
	}
	result, ctxErr, err := runAcquire(ctx, start)
	if err != nil {
		return nil, err
	}
	if deadlineBound && result.err != nil && (result.err.Kind == KindTimeout || result.err.Kind == KindNotAcquired) {
		// The wait, cut to the deadline, ran out at it (or, with the
		// deadline passed as it started, made one attempt).
		ctxErr = context.DeadlineExceeded
	}
	if ctxErr != nil {
		if result.lock != nil {
			// Won just as ctx ended: nobody will use it, so release it.
			C.go_abandon(result.lock)
		}
		return nil, contextError(fmt.Sprintf("%s %q", what, name), ctxErr)
	}
	if result.err != nil {
		return nil, result.err
	}
	return newLock(result.lock)
}

// Acquire takes the lock on resource for ttl, waiting while another owner
// holds it: until ctx ends (the error then wraps ctx.Err() and nothing is
// left held) or for the WithWait bound (ErrTimeout). A ctx deadline bounds
// the wait as WithWait does: the waiter has left every queue when Acquire
// returns, which may be up to about two node timeouts after the deadline
// (an attempt on its way, then the leave; a node being reconnected can add
// its connect timeout). The lock is renewed
// automatically until Release (see LockAutoRenew); Lost reports a loss.
//
// Errors: ErrTimeout, ErrUnavailable (no majority of nodes answered),
// ErrInvalidArgument (empty resource or one over Limits.MaxResourceBytes, a
// ttl outside Limits.MinTTL..MaxTTL, a NUL byte), ErrClosed.
func (c *Client) Acquire(ctx context.Context, resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "resource", resource, ttl, opts, false, acquireLock)
}

// TryAcquire makes one attempt to take the lock on resource for ttl. When
// another owner holds it, it returns an error matching ErrNotAcquired
// (errors.Is(err, fencelock.ErrNotAcquired)): check for it as for any
// sentinel. A WithWait option is ignored.
func (c *Client) TryAcquire(ctx context.Context, resource string, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return c.acquire(ctx, "resource", resource, ttl, opts, true, acquireLock)
}

func acquireLock(client *C.fencelock_client, name *C.char, options *C.fencelock_lock_options,
	handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) C.fencelock_status {
	return C.go_acquire(client, name, options, handle, op, cerr)
}

// Fence is what a fenced write carries: the fencing token and the holder id
// of the grant it comes from (FencedSet). Holder 0 is a bare token, which
// writes only where every stored token is older.
type Fence struct {
	Token  uint64
	Holder uint64
}

// Lock is a held lock: a lock on a resource, a semaphore's permit, a read
// or write grant of a read-write lock, or a leadership. It is safe for
// concurrent use. Release it when done (it is renewed until then); a Lock
// dropped without Release stops renewing when garbage-collected, and its
// key then expires at its ttl.
type Lock struct {
	mu         sync.RWMutex // read: a call uses ptr; write: Release frees it
	ptr        *C.fencelock_lock
	resource   string
	token      uint64
	fence      Fence
	permit     int // -1 unless a semaphore's permit
	loss       *lossState
	lossHandle cgo.Handle
	cleanup    runtime.Cleanup
}

// nativeLock is what a Lock's cleanup frees when the Lock is collected
// unreleased.
type nativeLock struct {
	ptr        *C.fencelock_lock
	lossHandle cgo.Handle
}

func freeNativeLock(n nativeLock) {
	C.fencelock_lock_free(n.ptr) // no lost callback runs or starts after this
	n.lossHandle.Delete()
}

// newLock wraps a lock the library handed over and wires its lost callback.
func newLock(ptr *C.fencelock_lock) (*Lock, error) {
	l := &Lock{ptr: ptr, permit: -1, loss: newLossState()}
	var token C.uint64_t
	C.fencelock_lock_fencing_token(ptr, &token)
	var fence C.fencelock_fence
	C.fencelock_lock_fence(ptr, &fence)
	var permit C.uint32_t
	if C.fencelock_lock_permit(ptr, &permit) {
		l.permit = int(permit)
	}
	l.resource = C.GoString(C.fencelock_lock_resource(ptr))
	l.token = uint64(token)
	l.fence = Fence{Token: uint64(fence.token), Holder: uint64(fence.holder)}
	l.lossHandle = cgo.NewHandle(l.loss)
	var cerr *C.fencelock_error
	if err := started(C.go_on_lost(ptr, C.uintptr_t(l.lossHandle), &cerr), cerr); err != nil {
		C.go_abandon(ptr)
		l.lossHandle.Delete()
		return nil, err
	}
	l.cleanup = runtime.AddCleanup(l, freeNativeLock, nativeLock{ptr: ptr, lossHandle: l.lossHandle})
	return l, nil
}

// Resource is the name the lock was taken on.
func (l *Lock) Resource() string { return l.resource }

// FencingToken is the lock's fencing token: strictly greater than every
// earlier holder's for this resource. Send it with every write to what the
// lock protects, and have the storage refuse older tokens.
func (l *Lock) FencingToken() uint64 { return l.token }

// Fence is what a fenced write of this holder carries (FencedSet).
func (l *Lock) Fence() Fence { return l.fence }

// Permit is the number of a semaphore's permit (0 to permits-1; two holders
// at once never share one) and true; -1 and false for any other lock.
func (l *Lock) Permit() (int, bool) { return l.permit, l.permit >= 0 }

// IsHeld reports whether the lock is held: not released, not lost, and its
// validity (on the local monotonic clock) not run out.
func (l *Lock) IsHeld() bool {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return false
	}
	var held C.bool
	C.fencelock_lock_is_held(l.ptr, &held)
	return bool(held)
}

// Remaining is how long the lock stays valid without another renewal (0
// when not held).
func (l *Lock) Remaining() time.Duration {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.ptr == nil {
		return 0
	}
	var ms C.uint64_t
	C.fencelock_lock_remaining_ms(l.ptr, &ms)
	return time.Duration(ms) * time.Millisecond
}

// Lost returns a channel that receives the reason once if the lock is lost
// while held (deleted, taken over, unreachable, expired) and is then
// closed: stop touching what the lock protects. A receive after the first
// gets the zero LossReason (use LossReason for the reason). Nothing is sent
// after Release.
func (l *Lock) Lost() <-chan LossReason { return l.loss.ch }

// LossReason returns why the lock was lost, and false while it was not.
func (l *Lock) LossReason() (LossReason, bool) {
	r := LossReason(l.loss.reason.Load())
	return r, r != 0
}

// Extend sets the lock's ttl to ttl from now on a majority of nodes (it
// never re-creates a missing key); later renewals use the new ttl.
// Errors: ErrLost (the key is gone or owned by another: stop), ErrNotHeld
// (released before), ErrUnavailable, ErrInvalidArgument (ttl), and the
// context's error (wrapped) when ctx ends first.
func (l *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return err
	}
	result, ctxErr, err := run[doneResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		l.mu.RLock()
		defer l.mu.RUnlock()
		if l.ptr == nil {
			return newError(KindNotHeld, "the lock on %q was released", l.resource)
		}
		return started(C.go_extend(l.ptr, C.uint64_t(ttlMs), handle, op, cerr), *cerr)
	})
	if err != nil {
		return err
	}
	if ctxErr != nil {
		return contextError(fmt.Sprintf("extend %q", l.resource), ctxErr)
	}
	return orNil(result.err)
}

// Release releases the lock on every node (compare-and-delete), stops its
// renewal and frees it; whatever it returns, the Lock is done (Lost never
// fires after it). ctx bounds only the wait for the nodes' answer: when it
// ends first the release goes on in the background and Release returns the
// context's error (wrapped). Errors: ErrNotHeld (expired, lost or released
// before: releasing twice is safe), ErrUnavailable (too few nodes confirmed
// it; those that failed get it again in the background, and where it never
// lands the lock expires at its ttl).
func (l *Lock) Release(ctx context.Context) error {
	result, ctxErr, err := detached[doneResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.ptr == nil {
			return newError(KindNotHeld, "the lock on %q was released before", l.resource)
		}
		status := C.go_release(l.ptr, handle, op, cerr)
		// The release keeps what it needs: free the lock now, whatever happens.
		l.cleanup.Stop()
		freeNativeLock(nativeLock{ptr: l.ptr, lossHandle: l.lossHandle})
		l.ptr = nil
		return started(status, *cerr)
	})
	if err != nil {
		return err
	}
	if ctxErr != nil {
		return contextError(fmt.Sprintf("release %q", l.resource), ctxErr)
	}
	return orNil(result.err)
}

// String describes the lock for logs: its resource and fencing token.
func (l *Lock) String() string {
	return fmt.Sprintf("fencelock.Lock{%q, token %d}", l.resource, l.token)
}
