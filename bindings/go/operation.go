package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"runtime/cgo"
)

// starter begins one native *_async call whose callback delivers to the
// channel behind handle. On failure it returns the error (the callback will
// never be called); on success *op is the operation's handle.
type starter func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error

// run starts one native asynchronous operation and waits for its callback
// or for ctx. When ctx ends first it cancels the operation and still waits
// for the callback, which then comes at once (with CANCELLED, or with the
// outcome if the operation had already finished): no goroutine or thread
// is left blocked, and the caller sees the real outcome beside ctx.Err().
func run[T any](ctx context.Context, start starter) (result T, ctxErr error, err *Error) {
	return runOperation[T](ctx, start, cancelOperation)
}

// detached is run for an operation that must happen whatever ctx says (a
// release: the lock is freed either way): it starts even when ctx is done,
// and when ctx ends first it returns at once and lets the operation finish
// in the background (its callback still frees what it holds).
func detached[T any](ctx context.Context, start starter) (result T, ctxErr error, err *Error) {
	return runOperation[T](ctx, start, detachOperation)
}

// boundedByDeadline is run for an operation whose own time limit is ctx's
// deadline (an acquire whose wait was cut to it): when the deadline passes
// it waits for the operation, which ends by itself within about two
// per-node timeouts (an attempt on its way, then its leave; a node being
// reconnected can add its connect timeout) and cleans up
// before it does, instead of cancelling it. A ctx cancelled before its
// deadline still cancels.
func boundedByDeadline[T any](ctx context.Context, start starter) (result T, ctxErr error, err *Error) {
	return runOperation[T](ctx, start, finishAtDeadline)
}

// onContextEnd says what runOperation does when ctx ends first.
type onContextEnd int

const (
	cancelOperation  onContextEnd = iota // cancel the operation, wait for its callback
	detachOperation                      // return at once, the operation goes on
	finishAtDeadline                     // at the deadline, wait for the operation
)

func runOperation[T any](ctx context.Context, start starter, onEnd onContextEnd) (result T, ctxErr error, err *Error) {
	if e := ctx.Err(); e != nil && onEnd != detachOperation {
		return result, e, nil
	}
	results := make(chan T, 1) // the callback never blocks on it
	handle := cgo.NewHandle(results)
	var op *C.fencelock_operation
	var cerr *C.fencelock_error
	if err := start(C.uintptr_t(handle), &op, &cerr); err != nil {
		handle.Delete() // no callback will come
		return result, nil, err
	}
	defer C.fencelock_operation_free(op) // does not cancel; the callback frees the handle
	select {
	case result = <-results:
		return result, nil, nil
	case <-ctx.Done():
		switch {
		case onEnd == detachOperation:
			return result, ctx.Err(), nil
		case onEnd == finishAtDeadline && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return <-results, ctx.Err(), nil
		}
		C.fencelock_operation_cancel(op)
		return <-results, ctx.Err(), nil
	}
}

// started converts a starter's status: nil on success, else the error.
func started(status C.fencelock_status, cerr *C.fencelock_error) *Error {
	if status == C.FENCELOCK_STATUS_OK {
		return nil
	}
	return takeError(status, cerr)
}

// orNil turns a nil *Error into a nil error interface.
func orNil(err *Error) error {
	if err == nil {
		return nil
	}
	return err
}
