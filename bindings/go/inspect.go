package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
	"time"
)

// NodeLockState is one node's view of a lock (Client.Inspect), for
// operators: never the owner's token.
type NodeLockState struct {
	Node           string        // the node's URL, without credentials
	Held           bool          // whether the lock key exists there
	TTL            time.Duration // the key's remaining ttl; 0 when it is not there, has no ttl, or the node did not answer
	FencingCounter uint64        // the resource's fencing counter there: grants counted there, ever
	Waiters        int           // waiters in the lock's queue there whose lease still runs
	Error          string        // "" when the node answered; else why not (the other fields are then zero)
}

// Inspect returns each node's view of the lock on resource, one
// NodeLockState per node in the order NewClient was given them: held or
// not, the ttl left, the fencing counter and the live waiters, or the
// node's error. A node that does not answer does not fail the call. It runs
// one read-only script per node, all at once, each bounded by the connect
// timeout; a cancelled or expired ctx ends it at once (the error then
// wraps ctx.Err()). The answer is out of date as soon as it returns:
// it is for monitoring, not for deciding who holds the lock.
//
// Errors: ErrInvalidArgument (empty resource or one over
// Limits.MaxResourceBytes, a leading '}', a NUL byte), ErrClosed.
func (c *Client) Inspect(ctx context.Context, resource string) ([]NodeLockState, error) {
	if err := checkName("resource", resource); err != nil {
		return nil, err
	}
	cname := cString(resource)
	defer freeCString(cname)
	result, ctxErr, err := run[inspectResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return c.use(func(client *C.fencelock_client) *Error {
			return started(C.go_inspect(client, cname, handle, op, cerr), *cerr)
		})
	})
	if err != nil {
		return nil, err
	}
	if ctxErr != nil {
		return nil, contextError(fmt.Sprintf("inspect of %q", resource), ctxErr)
	}
	if result.err != nil {
		return nil, result.err
	}
	return result.states, nil
}

// nodeLockStates copies a native inspection (which the caller frees).
func nodeLockStates(inspection *C.fencelock_inspection) []NodeLockState {
	n := int(C.fencelock_inspection_node_count(inspection))
	states := make([]NodeLockState, 0, n)
	for i := range n {
		s := C.fencelock_inspection_node(inspection, C.size_t(i))
		if s == nil {
			break
		}
		state := NodeLockState{
			Node:           C.GoString(s.node),
			Held:           bool(s.held),
			FencingCounter: uint64(s.fencing_counter),
			Waiters:        int(s.waiters),
		}
		if s.has_ttl {
			state.TTL = time.Duration(s.ttl_ms) * time.Millisecond
		}
		if s.error != nil {
			state.Error = C.GoString(s.error)
		}
		states = append(states, state)
	}
	return states
}
