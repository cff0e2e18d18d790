package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"time"
	"unsafe"
)

// Metrics is a snapshot of what one client has counted since it was made
// (tests/vectors/protocol.json "metrics"). Acquisitions count every acquire
// of the client: locks, permits, read and write grants, campaigns.
type Metrics struct {
	Acquired        uint64                // acquisitions that returned a lock
	Failed          map[Kind]uint64       // failed acquisitions by kind, every kind present (zeros too)
	Lost            map[LossReason]uint64 // held locks lost, by reason, every reason present
	Released        uint64                // releases that succeeded
	Renewals        uint64                // automatic renewals that succeeded
	RenewalFailures uint64                // automatic renewals that failed (retried until lost)
	Held            uint64                // gauge: locks held now
	Waiting         uint64                // gauge: acquires waiting in a queue now
	AcquireLatency  Latency               // how long acquires took
}

// Latency is the acquire-latency histogram of a Metrics snapshot.
type Latency struct {
	Count   uint64          // acquire calls timed
	Sum     time.Duration   // their total duration
	Buckets []LatencyBucket // cumulative, on LatencyBounds (as Prometheus counts)
	P50     time.Duration   // estimated median: a bucket's upper bound; 0 when no estimate
	P99     time.Duration   // estimated 99th percentile, as P50
}

// LatencyBucket counts the acquires that took at most UpperBound.
type LatencyBucket struct {
	UpperBound time.Duration
	Count      uint64
}

// LatencyBounds are the upper bounds of the acquire-latency buckets,
// ascending (0.5 ms to 10 s, the latency_buckets_seconds every front shares).
func LatencyBounds() []time.Duration {
	bounds := unsafe.Slice(C.fencelock_latency_buckets(), C.FENCELOCK_LATENCY_BUCKET_COUNT)
	out := make([]time.Duration, len(bounds))
	for i, ns := range bounds {
		out[i] = time.Duration(ns)
	}
	return out
}

// Metrics returns what the client has counted so far. It does no I/O; it
// fails only after Close (ErrClosed).
func (c *Client) Metrics() (Metrics, error) {
	var m C.fencelock_metrics
	m.size = C.size_t(unsafe.Sizeof(m))
	err := c.use(func(client *C.fencelock_client) *Error {
		var cerr *C.fencelock_error
		return started(C.fencelock_client_metrics(client, &m, &cerr), cerr)
	})
	if err != nil {
		return Metrics{}, err
	}
	out := Metrics{
		Acquired:        uint64(m.acquired),
		Released:        uint64(m.released),
		Renewals:        uint64(m.renewals),
		RenewalFailures: uint64(m.renewal_failures),
		Held:            uint64(m.held),
		Waiting:         uint64(m.waiting),
		Failed:          map[Kind]uint64{},
		Lost:            map[LossReason]uint64{},
	}
	for _, f := range m.failed[:min(int(m.n_failed), len(m.failed))] {
		out.Failed[kindOfStatus(f.kind)] += uint64(f.count)
	}
	for _, l := range m.lost[:min(int(m.n_lost), len(m.lost))] {
		out.Lost[LossReason(l.reason)] += uint64(l.count)
	}
	bounds := LatencyBounds()
	out.AcquireLatency = Latency{
		Count: uint64(m.latency_count),
		Sum:   time.Duration(m.latency_sum_ns),
		P50:   quantile(m.latency_p50_ns),
		P99:   quantile(m.latency_p99_ns),
	}
	for i, count := range m.latency_buckets {
		out.AcquireLatency.Buckets = append(out.AcquireLatency.Buckets, LatencyBucket{UpperBound: bounds[i], Count: uint64(count)})
	}
	return out, nil
}

func quantile(ns C.uint64_t) time.Duration {
	if ns == C.FENCELOCK_LATENCY_NONE {
		return 0
	}
	return time.Duration(ns)
}
