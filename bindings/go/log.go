package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
)

// LevelTrace is the slog level of fencelock's trace records (each renewal),
// below slog.LevelDebug.
const LevelTrace = slog.Level(-8)

// The levels of fencelock's log records (tests/vectors/protocol.json
// "log_levels", most severe first) and the slog level each becomes.
var logLevels = []struct {
	name   string
	cValue int
	level  slog.Level
}{
	{"error", C.FENCELOCK_LOG_ERROR, slog.LevelError},
	{"warn", C.FENCELOCK_LOG_WARN, slog.LevelWarn},
	{"info", C.FENCELOCK_LOG_INFO, slog.LevelInfo},
	{"debug", C.FENCELOCK_LOG_DEBUG, slog.LevelDebug},
	{"trace", C.FENCELOCK_LOG_TRACE, LevelTrace},
}

// slogLevel maps a fencelock level onto slog's; a level from a later
// library is debug.
func slogLevel(cValue int) slog.Level {
	for _, l := range logLevels {
		if l.cValue == cValue {
			return l.level
		}
	}
	return slog.LevelDebug
}

type sink struct{ handler slog.Handler }

var (
	logSink    atomic.Pointer[sink]
	logMu      sync.Mutex
	forwarding bool // fencelock_log_forward succeeded once (under logMu)
)

// ForwardLogs sends libfencelock's log records (a lock acquired, released
// or lost, a renewal failed, a node unreachable…) to h from now on, in
// place of any earlier handler; nil stops. Pass a logger's handler:
// fencelock.ForwardLogs(slog.Default().Handler()).
//
// Levels: error → slog.LevelError, warn → slog.LevelWarn, info →
// slog.LevelInfo, debug → slog.LevelDebug, trace (each renewal) →
// LevelTrace. The library forwards the levels h is Enabled for when
// ForwardLogs is called: call it again after changing h's level. Each record
// carries the message (such as "lock lost"), a "target" attribute (the
// module, such as fencelock::lock_state) and its fields as string
// attributes (resource=jobs reason=deleted). No record carries a password or
// a lock's random token.
//
// Records arrive on one fencelock thread, in order; a handler that cannot
// keep up loses records (a warning says how many), and one that panics
// loses the record it panicked on. Forwarding is process-wide.
func ForwardLogs(h slog.Handler) error {
	logMu.Lock()
	defer logMu.Unlock()
	threshold := 0 // FENCELOCK_LOG_OFF
	if h != nil {
		for i := len(logLevels) - 1; i >= 0; i-- {
			if h.Enabled(context.Background(), logLevels[i].level) {
				threshold = logLevels[i].cValue
				break
			}
		}
	}
	if threshold == 0 {
		if h == nil {
			logSink.Store(nil)
		} else {
			logSink.Store(&sink{handler: h})
		}
		if forwarding {
			C.fencelock_log_set_level(C.FENCELOCK_LOG_OFF)
		}
		return nil
	}
	logSink.Store(&sink{handler: h})
	var cerr *C.fencelock_error
	if err := started(C.go_log_forward(C.int32_t(threshold), &cerr), cerr); err != nil {
		return err
	}
	forwarding = true
	return nil
}

// logFields turns "name=value name=value" into attributes. A word without
// '=' belongs to the value before it (a value with spaces).
func logFields(fields string) []slog.Attr {
	var attrs []slog.Attr
	for _, word := range strings.Fields(fields) {
		name, value, ok := strings.Cut(word, "=")
		if ok && name != "" || len(attrs) == 0 {
			if !ok {
				name, value = "field", word
			}
			attrs = append(attrs, slog.String(name, value))
			continue
		}
		last := &attrs[len(attrs)-1]
		last.Value = slog.StringValue(last.Value.String() + " " + word)
	}
	return attrs
}
