package fencelock

// The Go functions libfencelock calls back, on its own callback thread (or,
// for log records, its log thread): never a goroutine of the caller's, never
// a thread that does fencelock's I/O. Each one only hands its result to a
// buffered channel or an atomic and returns, so it never holds up the
// callbacks queued behind it. user_data is a runtime/cgo.Handle (an integer):
// C never holds a Go pointer.

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"runtime/cgo"
	"time"
	"unsafe"
)

// The outcome of an acquire, as the callback delivers it.
type acquireResult struct {
	lock *C.fencelock_lock
	err  *Error
}

// The outcome of a release, an extend or a fenced write.
type doneResult struct {
	err *Error
}

// The outcome of waiting for the next leader.
type leaderResult struct {
	leader Leader
	err    *Error
}

// The outcome of an inspection, copied out of C.
type inspectResult struct {
	states []NodeLockState
	err    *Error
}

// The outcome of counting a semaphore's holders.
type holdersResult struct {
	holders int
	err     *Error
}

// The outcome of a fenced read, copied out of C.
type fencedValueResult struct {
	value FencedValue
	found bool
	err   *Error
}

// The outcome of connecting: the client is the receiver's to free.
type clientResult struct {
	client *C.fencelock_client
	err    *Error
}

//export fencelockGoAcquired
func fencelockGoAcquired(handle C.uintptr_t, status C.fencelock_status, lock *C.fencelock_lock, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan acquireResult)
	h.Delete() // the ABI calls this exactly once per started operation
	if status == C.FENCELOCK_STATUS_OK {
		results <- acquireResult{lock: lock}
		return
	}
	results <- acquireResult{err: takeError(status, cerr)}
}

//export fencelockGoDone
func fencelockGoDone(handle C.uintptr_t, status C.fencelock_status, cerr *C.fencelock_error) {
	if handle == 0 { // a release nobody waits for (go_abandon)
		C.fencelock_error_free(cerr)
		return
	}
	h := cgo.Handle(handle)
	results := h.Value().(chan doneResult)
	h.Delete()
	if status == C.FENCELOCK_STATUS_OK {
		results <- doneResult{}
		return
	}
	results <- doneResult{err: takeError(status, cerr)}
}

//export fencelockGoLeader
func fencelockGoLeader(handle C.uintptr_t, status C.fencelock_status, leader *C.fencelock_leader, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan leaderResult)
	h.Delete()
	if status == C.FENCELOCK_STATUS_OK && leader != nil {
		// The leader is lent for this call only: copy it.
		value := C.GoBytes(unsafe.Pointer(leader.value), C.int(leader.value_len))
		results <- leaderResult{leader: Leader{Value: value, Epoch: uint64(leader.epoch)}}
		return
	}
	results <- leaderResult{err: takeError(status, cerr)}
}

//export fencelockGoInspected
func fencelockGoInspected(handle C.uintptr_t, status C.fencelock_status, inspection *C.fencelock_inspection, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan inspectResult)
	h.Delete()
	if status == C.FENCELOCK_STATUS_OK {
		// The inspection is this callback's: copy it, then free it.
		states := nodeLockStates(inspection)
		C.fencelock_inspection_free(inspection)
		results <- inspectResult{states: states}
		return
	}
	results <- inspectResult{err: takeError(status, cerr)}
}

//export fencelockGoHolders
func fencelockGoHolders(handle C.uintptr_t, status C.fencelock_status, holders C.size_t, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan holdersResult)
	h.Delete()
	if status == C.FENCELOCK_STATUS_OK {
		results <- holdersResult{holders: int(holders)}
		return
	}
	results <- holdersResult{err: takeError(status, cerr)}
}

//export fencelockGoFencedValue
func fencelockGoFencedValue(handle C.uintptr_t, status C.fencelock_status, value *C.char, token C.uint64_t, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan fencedValueResult)
	h.Delete()
	if status != C.FENCELOCK_STATUS_OK {
		results <- fencedValueResult{err: takeError(status, cerr)}
		return
	}
	if value == nil { // the key does not exist
		results <- fencedValueResult{}
		return
	}
	// The value is this callback's: copy it, then free it.
	read := FencedValue{Value: C.GoString(value), Token: uint64(token)}
	C.fencelock_string_free(value)
	results <- fencedValueResult{value: read, found: true}
}

//export fencelockGoClient
func fencelockGoClient(handle C.uintptr_t, status C.fencelock_status, client *C.fencelock_client, cerr *C.fencelock_error) {
	h := cgo.Handle(handle)
	results := h.Value().(chan clientResult)
	h.Delete()
	if status == C.FENCELOCK_STATUS_OK {
		results <- clientResult{client: client}
		return
	}
	results <- clientResult{err: takeError(status, cerr)}
}

//export fencelockGoLost
func fencelockGoLost(handle C.uintptr_t, reason C.fencelock_loss_reason) {
	// The handle lives until fencelock_lock_free returned, after which the
	// ABI promises no call of this callback runs or starts.
	if state, ok := cgo.Handle(handle).Value().(*lossState); ok {
		state.fire(LossReason(reason))
	}
}

//export fencelockGoLog
func fencelockGoLog(record *C.fencelock_log_record) {
	sink := logSink.Load()
	if sink == nil || record == nil {
		return
	}
	// A handler that panics loses this record only: a panic must never
	// unwind into the C caller.
	defer func() { _ = recover() }()
	level := slogLevel(int(record.level))
	ctx := context.Background()
	if !sink.handler.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, C.GoString(record.message), 0)
	r.AddAttrs(slog.String("target", C.GoString(record.target)))
	r.AddAttrs(logFields(C.GoString(record.fields))...)
	_ = sink.handler.Handle(ctx, r)
}
