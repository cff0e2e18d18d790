package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Leadership is a won election: a *Lock on the election's name whose
// fencing token is the leader's epoch, greater than every earlier leader's.
// IsHeld says whether it still leads, Lost when it stopped; Resign (or
// Release) hands over at once to the next candidate.
type Leadership struct {
	*Lock
	value []byte
}

// Epoch is this leader's epoch (its fencing token).
func (l *Leadership) Epoch() uint64 { return l.FencingToken() }

// Value is what this leader announced to observers.
func (l *Leadership) Value() []byte { return append([]byte(nil), l.value...) }

// Resign stops leading (a Release): the next candidate wins at once.
func (l *Leadership) Resign(ctx context.Context) error { return l.Release(ctx) }

// Leader is a leader of an election as observers learn it.
type Leader struct {
	Value []byte // what it announced (an address, an id)
	Epoch uint64 // its epoch: greater than every earlier leader's
}

// Campaign runs for leader of the election name: waits in line (woken by
// push) until it wins, then announces value (at most
// Limits.MaxLeaderValueBytes) to observers. ttl is the leader's lease,
// renewed while it leads: a leader that dies is replaced about ttl later.
// It waits until ctx ends (the error wraps ctx.Err() and the candidate
// withdraws) or for the WithWait bound (ErrTimeout; WithWait(0): one
// attempt, ErrNotAcquired while another leads). WithWait is the only
// option a campaign takes. Do not also lock name for anything else: an
// election is a lock on its name.
func (c *Client) Campaign(ctx context.Context, name string, ttl time.Duration, value []byte, opts ...LockOption) (*Leadership, error) {
	if err := checkName("election name", name); err != nil {
		return nil, err
	}
	ttlMs, err := ttlMillis(ttl)
	if err != nil {
		return nil, err
	}
	var config lockConfig
	for _, opt := range opts {
		if opt != nil {
			opt(&config)
		}
	}
	if config.fair || config.autoRenew != nil || config.maxHold != nil || config.maxRenewals != nil {
		return nil, newError(KindInvalidArgument, "a campaign takes only WithWait: a leader is renewed while it leads and candidates wait in line")
	}
	wait := limits.MaxWait
	if config.wait != nil {
		wait = *config.wait
	}
	waitMs, err := waitMillis(wait)
	if err != nil {
		return nil, err
	}
	waitMs, deadlineBound := waitWithin(ctx, waitMs)
	if len(value) > limits.MaxLeaderValueBytes {
		return nil, newError(KindInvalidArgument, "the leader value is %d bytes: at most %d", len(value), limits.MaxLeaderValueBytes)
	}
	cname := cString(name)
	defer freeCString(cname)
	var cvalue unsafe.Pointer
	if len(value) > 0 {
		cvalue = C.CBytes(value)
		defer C.free(cvalue)
	}
	lock, lerr := c.finishAcquire(ctx, "campaign", name, deadlineBound, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return c.use(func(client *C.fencelock_client) *Error {
			return started(C.go_campaign(client, cname, C.uint64_t(ttlMs), C.uint64_t(waitMs),
				(*C.uint8_t)(cvalue), C.size_t(len(value)), handle, op, cerr), *cerr)
		})
	})
	if lerr != nil {
		return nil, lerr
	}
	return &Leadership{Lock: lock, value: append([]byte(nil), value...)}, nil
}

// Observation follows the leaders of one election (Client.Observe). Safe
// for concurrent use: each leader goes to one caller of Next. Close it when
// done.
type Observation struct {
	mu      sync.RWMutex // read: a call uses ptr; write: Close frees it
	ptr     *C.fencelock_observation
	name    string
	cleanup runtime.Cleanup
}

// Observe follows the election name: Next gives the current leader, then
// each new one as it announces itself (by push, with a read every 2 s as a
// safety net). A reader slower than the elections skips to the latest
// leader. It does not block: it subscribes in the background.
func (c *Client) Observe(name string) (*Observation, error) {
	if err := checkName("election name", name); err != nil {
		return nil, err
	}
	cname := cString(name)
	defer freeCString(cname)
	var ptr *C.fencelock_observation
	err := c.use(func(client *C.fencelock_client) *Error {
		var cerr *C.fencelock_error
		return started(C.fencelock_observe(client, cname, &ptr, &cerr), cerr)
	})
	if err != nil {
		return nil, err
	}
	o := &Observation{ptr: ptr, name: name}
	o.cleanup = runtime.AddCleanup(o, func(p *C.fencelock_observation) { C.fencelock_observation_free(p) }, ptr)
	return o, nil
}

// Next waits for the next leader until ctx ends (the error then wraps
// ctx.Err()). After Close, or once the observation cannot go on (its client
// closed), it returns ErrClosed.
func (o *Observation) Next(ctx context.Context) (Leader, error) {
	result, ctxErr, err := run[leaderResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		o.mu.RLock()
		defer o.mu.RUnlock()
		if o.ptr == nil {
			return newError(KindClosed, "the observation of %q is closed", o.name)
		}
		return started(C.go_observation_next(o.ptr, handle, op, cerr), *cerr)
	})
	switch {
	case err != nil:
		return Leader{}, err
	case result.err == nil && ctxErr == nil:
		return result.leader, nil
	case result.err == nil:
		return result.leader, nil // it came just as ctx ended: not lost
	case ctxErr != nil:
		return Leader{}, contextError(fmt.Sprintf("observe %q", o.name), ctxErr)
	case result.err.Kind == KindCancelled:
		return Leader{}, newError(KindClosed, "the observation of %q was closed", o.name)
	}
	return Leader{}, result.err
}

// Leaders iterates over the leaders as Next gives them, until ctx ends or
// the observation is closed (both end the loop quietly); another failure is
// yielded once, then the loop ends.
//
//	for leader, err := range observation.Leaders(ctx) { … }
func (o *Observation) Leaders(ctx context.Context) iter.Seq2[Leader, error] {
	return func(yield func(Leader, error) bool) {
		for {
			leader, err := o.Next(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, ErrClosed) {
					yield(Leader{}, err)
				}
				return
			}
			if !yield(leader, nil) {
				return
			}
		}
	}
}

// Close stops observing: its subscriptions end, and a Next still waiting
// returns ErrClosed. Calling it again does nothing.
func (o *Observation) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ptr == nil {
		return nil
	}
	o.cleanup.Stop()
	C.fencelock_observation_free(o.ptr)
	o.ptr = nil
	return nil
}
