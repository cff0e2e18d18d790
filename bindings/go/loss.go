package fencelock

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// LossReason says why a held lock was lost
// (tests/vectors/protocol.json "loss_reasons").
type LossReason int

// The loss reasons.
const (
	// LossDeleted: a renewal found the key missing on a majority (deleted,
	// evicted, a node restarted empty).
	LossDeleted LossReason = 1
	// LossTakenOver: a renewal found another owner's token on a majority.
	LossTakenOver LossReason = 2
	// LossUnreachable: renewals kept failing until the validity ran out.
	LossUnreachable LossReason = 3
	// LossExpired: the lease ran out without renewal (auto-renew off, or a
	// renewal cap reached).
	LossExpired LossReason = 4
	// LossOther: a reason added by a later version of the library.
	LossOther LossReason = 99
)

var lossReasonNames = map[LossReason]string{
	LossDeleted:     "deleted",
	LossTakenOver:   "taken_over",
	LossUnreachable: "unreachable",
	LossExpired:     "expired",
	LossOther:       "other",
}

// String is the reason's shared name, such as "deleted".
func (r LossReason) String() string {
	if name, ok := lossReasonNames[r]; ok {
		return name
	}
	return fmt.Sprintf("reason(%d)", int(r))
}

// lossState is what a lock's lost callback reaches through its cgo.Handle:
// never the Lock itself, so a Lock nobody references stays collectable.
type lossState struct {
	once   sync.Once
	ch     chan LossReason
	reason atomic.Int32
}

func newLossState() *lossState { return &lossState{ch: make(chan LossReason, 1)} }

// fire reports the loss once: the reason is sent, then the channel closed.
func (s *lossState) fire(reason LossReason) {
	s.once.Do(func() {
		s.reason.Store(int32(reason))
		s.ch <- reason
		close(s.ch)
	})
}
