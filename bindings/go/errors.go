package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Kind is what went wrong: one of the error kinds every fencelock front
// shares (docs/protocol.md §7, tests/vectors/protocol.json "error_kinds").
// Its value is the kind's stable code, which is also the C ABI's
// fencelock_status.
type Kind int

// The error kinds. Test for one with errors.Is and its sentinel
// (errors.Is(err, fencelock.ErrTimeout)) or read (*Error).Kind.
const (
	KindNotAcquired     Kind = 1   // held by someone else (one attempt, or no wait)
	KindTimeout         Kind = 2   // the wait ran out before the lock could be taken
	KindUnavailable     Kind = 3   // too few nodes answered to decide
	KindLost            Kind = 4   // the lock was lost while held
	KindNotHeld         Kind = 5   // the lock was no longer held at release or extend
	KindStaleToken      Kind = 6   // a fenced write carried a token older than the stored one
	KindInvalidArgument Kind = 7   // a bad argument: empty resource, ttl out of range, NUL byte…
	KindConfig          Kind = 8   // a bad client configuration: URL, no nodes, zero timeout…
	KindAuth            Kind = 9   // credentials refused, or the ACL user lacks a permission
	KindTLS             Kind = 10  // TLS handshake or certificate verification failed
	KindClosed          Kind = 11  // the client, lock or observation is closed
	KindWouldBlock      Kind = 12  // a blocking call from inside an async runtime (never from Go)
	KindCancelled       Kind = 102 // the context was cancelled before the operation ended
	KindInternal        Kind = 200 // a bug in fencelock
)

var kindNames = map[Kind]string{
	KindNotAcquired:     "not_acquired",
	KindTimeout:         "timeout",
	KindUnavailable:     "unavailable",
	KindLost:            "lost",
	KindNotHeld:         "not_held",
	KindStaleToken:      "stale_token",
	KindInvalidArgument: "invalid_argument",
	KindConfig:          "config",
	KindAuth:            "auth",
	KindTLS:             "tls",
	KindClosed:          "closed",
	KindWouldBlock:      "would_block",
	KindCancelled:       "cancelled",
	KindInternal:        "internal",
}

// String is the kind's shared name, such as "not_acquired".
func (k Kind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// Sentinel errors, one per kind: errors.Is(err, ErrNotAcquired) is true for
// every *Error of that kind. ErrCancelled and ErrTimeout also match the
// error returned when the context ends first, which wraps ctx.Err() as well
// (errors.Is(err, context.Canceled) or context.DeadlineExceeded).
var (
	ErrNotAcquired     = sentinel(KindNotAcquired)
	ErrTimeout         = sentinel(KindTimeout)
	ErrUnavailable     = sentinel(KindUnavailable)
	ErrLost            = sentinel(KindLost)
	ErrNotHeld         = sentinel(KindNotHeld)
	ErrStaleToken      = sentinel(KindStaleToken)
	ErrInvalidArgument = sentinel(KindInvalidArgument)
	ErrConfig          = sentinel(KindConfig)
	ErrAuth            = sentinel(KindAuth)
	ErrTLS             = sentinel(KindTLS)
	ErrClosed          = sentinel(KindClosed)
	ErrWouldBlock      = sentinel(KindWouldBlock)
	ErrCancelled       = sentinel(KindCancelled)
	ErrInternal        = sentinel(KindInternal)
)

var sentinels = map[Kind]*Error{}

func sentinel(kind Kind) *Error {
	e := &Error{Kind: kind, Message: "fencelock: " + kind.String(), sentinel: true}
	sentinels[kind] = e
	return e
}

// NodeOutcome is what one node answered in a quorum operation
// (tests/vectors/protocol.json "node_outcomes").
type NodeOutcome int

// The node outcomes.
const (
	NodeOK           NodeOutcome = 0 // did what was asked
	NodeHeldByOther  NodeOutcome = 1 // another owner holds the key there
	NodeMissing      NodeOutcome = 2 // the key does not exist there
	NodeTimedOut     NodeOutcome = 3 // no reply within the per-node timeout
	NodeFailed       NodeOutcome = 4 // an error reply or no connection (see Detail)
	NodePending      NodeOutcome = 5 // the decision came before its reply
	nodeOutcomeCount             = 6
)

var nodeOutcomeNames = [nodeOutcomeCount]string{"ok", "held_by_other", "missing", "timed_out", "failed", "pending"}

// String is the outcome's shared name, such as "held_by_other".
func (o NodeOutcome) String() string {
	if o >= 0 && o < nodeOutcomeCount {
		return nodeOutcomeNames[o]
	}
	return fmt.Sprintf("outcome(%d)", int(o))
}

// NodeReport is what one node answered: its URL (without password), its
// outcome and the node's own words.
type NodeReport struct {
	Node    string
	Outcome NodeOutcome
	Detail  string
}

// Error is every error this package returns: a Kind, a message that says
// what failed, where and what to do, and, for operations on several nodes,
// what each node answered.
type Error struct {
	Kind    Kind
	Message string
	Nodes   []NodeReport

	cause    error // the context's error, when the context ended the operation
	sentinel bool
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, ErrKind) true for every error of that kind.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.sentinel && t.Kind == e.Kind
}

// Unwrap returns the context's error when the context ended the operation.
func (e *Error) Unwrap() error { return e.cause }

// newError makes an error of kind with a message (prefixed "fencelock: ").
func newError(kind Kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Message: "fencelock: " + fmt.Sprintf(format, args...)}
}

// contextError is the error for an operation the context ended: kind
// timeout for a deadline, cancelled otherwise, wrapping ctx.Err().
func contextError(what string, err error) *Error {
	kind := KindCancelled
	if errors.Is(err, context.DeadlineExceeded) {
		kind = KindTimeout
	}
	return &Error{Kind: kind, Message: "fencelock: " + what + ": " + err.Error(), cause: err}
}

// kindOfStatus maps a C status onto a kind. The call-level statuses (a NULL
// argument, invalid UTF-8) are bad arguments.
func kindOfStatus(status C.fencelock_status) Kind {
	switch status {
	case C.FENCELOCK_STATUS_NULL_ARGUMENT, C.FENCELOCK_STATUS_INVALID_UTF8:
		return KindInvalidArgument
	}
	if _, ok := kindNames[Kind(status)]; ok {
		return Kind(status)
	}
	return KindInternal
}

// takeError converts a failed status and its error object (which may be
// NULL) into an *Error, and frees the error object.
func takeError(status C.fencelock_status, cerr *C.fencelock_error) *Error {
	defer C.fencelock_error_free(cerr)
	e := &Error{Kind: kindOfStatus(status)}
	message := ""
	if cerr != nil {
		message = C.GoString(C.fencelock_error_message(cerr))
		count := int(C.fencelock_error_node_count(cerr))
		for i := 0; i < count; i++ {
			var node, detail *C.char
			var outcome C.fencelock_node_outcome
			if C.fencelock_error_node(cerr, C.size_t(i), &node, &outcome, &detail) != C.FENCELOCK_STATUS_OK {
				continue
			}
			e.Nodes = append(e.Nodes, NodeReport{Node: C.GoString(node), Outcome: NodeOutcome(outcome), Detail: C.GoString(detail)})
		}
	}
	if message == "" {
		message = e.Kind.String() + " (" + statusName(int32(status)) + ")"
	}
	if !strings.HasPrefix(message, "fencelock") {
		message = "fencelock: " + message
	}
	e.Message = message
	return e
}

// statusName is the C name of a status, such as "FENCELOCK_STATUS_TIMEOUT".
func statusName(status int32) string {
	return C.GoString(C.fencelock_status_name(C.int32_t(status)))
}

// cStatus converts a code to the C status type (for the tests, which cannot use cgo).
func cStatus(code int) C.fencelock_status { return C.fencelock_status(code) }
