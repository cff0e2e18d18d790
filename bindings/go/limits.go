package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Limits are the loaded library's bounds on arguments
// (tests/vectors/protocol.json "limits"). Arguments outside them give an
// error of kind KindInvalidArgument (KindConfig for client options).
type Limits struct {
	MinTTL              time.Duration // shortest ttl (10 ms)
	MaxTTL              time.Duration // longest ttl (2^31-1 ms, what Redis's PEXPIRE takes)
	MaxWait             time.Duration // longest wait (366 days)
	MaxResourceBytes    int           // longest resource name or fenced key, in bytes
	MaxPrefixBytes      int           // longest key prefix, in bytes
	MaxFencingToken     uint64        // largest fencing token handed out (2^53-1)
	MaxHolderID         uint64        // largest holder id of a Fence
	MaxDriftFactor      float64       // largest clock-drift factor
	MaxLeaderValueBytes int           // longest value a leader may announce
	MaxPermits          int           // most permits a semaphore may have
}

var limits = readLimits()

func readLimits() Limits {
	l := C.fencelock_get_limits()
	return Limits{
		MinTTL:              time.Duration(l.min_ttl_ms) * time.Millisecond,
		MaxTTL:              time.Duration(l.max_ttl_ms) * time.Millisecond,
		MaxWait:             time.Duration(l.max_wait_ms) * time.Millisecond,
		MaxResourceBytes:    int(l.max_resource_bytes),
		MaxPrefixBytes:      int(l.max_prefix_bytes),
		MaxFencingToken:     uint64(l.max_fencing_token),
		MaxHolderID:         uint64(l.max_holder_id),
		MaxDriftFactor:      float64(l.max_drift_factor),
		MaxLeaderValueBytes: int(l.max_leader_value_bytes),
		MaxPermits:          int(l.max_permits),
	}
}

// GetLimits returns the loaded library's limits.
func GetLimits() Limits { return limits }

// Version is the loaded library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.fencelock_version()) }

// checkString refuses what a C string cannot carry: a NUL byte would cut it
// short, and the library takes UTF-8 only.
func checkString(kind Kind, what, s string) *Error {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return newError(kind, "%s contains a NUL byte at offset %d: C strings cannot carry it", what, i)
	}
	if !utf8.ValidString(s) {
		return newError(kind, "%s is not valid UTF-8", what)
	}
	return nil
}

// checkName checks a resource, semaphore, lock or election name; the
// library checks the rest (length, a leading '}').
func checkName(what, name string) *Error {
	if name == "" {
		return newError(KindInvalidArgument, "the %s is empty: give 1 to %d bytes", what, limits.MaxResourceBytes)
	}
	return checkString(KindInvalidArgument, "the "+what, name)
}

// ttlMillis checks a ttl and converts it to whole milliseconds (truncated).
func ttlMillis(ttl time.Duration) (uint64, *Error) {
	if ttl < limits.MinTTL || ttl > limits.MaxTTL {
		return 0, newError(KindInvalidArgument, "ttl %v is out of range: give %v to %v", ttl, limits.MinTTL, limits.MaxTTL)
	}
	return uint64(ttl / time.Millisecond), nil
}

// waitMillis checks a wait and converts it to whole milliseconds (truncated).
func waitMillis(wait time.Duration) (uint64, *Error) {
	if wait < 0 || wait > limits.MaxWait {
		return 0, newError(KindInvalidArgument, "wait %v is out of range: give 0 (one attempt) to %v", wait, limits.MaxWait)
	}
	return uint64(wait / time.Millisecond), nil
}
