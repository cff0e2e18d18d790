package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"time"
)

// Semaphore is a counting semaphore: at most Permits holders at once
// across every process and language. Each permit is a *Lock (renewed, with
// its own fencing token and Lost channel) whose Permit method says which
// one it is. Every user of one semaphore must give the same number of
// permits (otherwise ErrInvalidArgument, "has N permits").
type Semaphore struct {
	client  *Client
	name    string
	permits int
}

// Semaphore returns the semaphore name with permits permits (1 to
// Limits.MaxPermits; checked when it is used). It does no I/O. A semaphore's
// keys never collide with a lock's of the same name.
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	return &Semaphore{client: c, name: name, permits: permits}
}

// Name is the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// Permits is how many holders the semaphore admits at once.
func (s *Semaphore) Permits() int { return s.permits }

func (s *Semaphore) checkPermits() *Error {
	if s.permits < 1 || s.permits > limits.MaxPermits {
		return newError(KindInvalidArgument, "permits %d is out of range: give 1 to %d", s.permits, limits.MaxPermits)
	}
	return nil
}

func (s *Semaphore) begin() beginAcquire {
	permits := C.uint32_t(s.permits)
	return func(client *C.fencelock_client, name *C.char, options *C.fencelock_lock_options,
		handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) C.fencelock_status {
		return C.go_semaphore_acquire(client, name, permits, options, handle, op, cerr)
	}
}

// Acquire takes a permit for ttl, waiting while every permit is held: until
// ctx ends or for the WithWait bound (ErrTimeout). Errors as Client.Acquire.
func (s *Semaphore) Acquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if err := s.checkPermits(); err != nil {
		return nil, err
	}
	return s.client.acquire(ctx, "semaphore", s.name, ttl, opts, false, s.begin())
}

// TryAcquire makes one attempt to take a permit for ttl; ErrNotAcquired
// when every permit is held.
func (s *Semaphore) TryAcquire(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	if err := s.checkPermits(); err != nil {
		return nil, err
	}
	return s.client.acquire(ctx, "semaphore", s.name, ttl, opts, true, s.begin())
}

// Holders is how many permits are held now (on a majority of the nodes):
// for monitoring, out of date as soon as it returns. It takes one round
// trip (bounded by the connect timeout); a cancelled or expired ctx ends it
// at once (the error then wraps ctx.Err()). ErrUnavailable when no
// majority answered.
func (s *Semaphore) Holders(ctx context.Context) (int, error) {
	if err := s.checkPermits(); err != nil {
		return 0, err
	}
	if err := checkName("semaphore", s.name); err != nil {
		return 0, err
	}
	name := cString(s.name)
	defer freeCString(name)
	permits := C.uint32_t(s.permits)
	result, ctxErr, err := run[holdersResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return s.client.use(func(client *C.fencelock_client) *Error {
			return started(C.go_semaphore_holders(client, name, permits, handle, op, cerr), *cerr)
		})
	})
	if err != nil {
		return 0, err
	}
	if ctxErr != nil {
		return 0, contextError("holders of semaphore "+s.name, ctxErr)
	}
	if result.err != nil {
		return 0, result.err
	}
	return result.holders, nil
}
