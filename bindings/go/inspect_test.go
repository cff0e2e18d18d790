package fencelock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// inspectUntil polls Inspect until seen holds of the answer (a grant or a
// release returns once a majority decided: on three nodes the last one may
// answer a little later).
func inspectUntil(t *testing.T, c *Client, resource, what string, seen func([]NodeLockState) bool) []NodeLockState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		states, err := c.Inspect(context.Background(), resource)
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if seen(states) {
			return states
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s; last seen %+v", what, states)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func every(states []NodeLockState, f func(NodeLockState) bool) bool {
	return len(states) > 0 && !slices.ContainsFunc(states, func(s NodeLockState) bool { return !f(s) })
}

func highestCounter(states []NodeLockState) uint64 {
	var highest uint64
	for _, s := range states {
		highest = max(highest, s.FencingCounter)
	}
	return highest
}

func checkFree(t *testing.T, states []NodeLockState, nodes int, counted bool) {
	t.Helper()
	if len(states) != nodes {
		t.Fatalf("%d entries for %d nodes: %+v", len(states), nodes, states)
	}
	for _, s := range states {
		if s.Error != "" || s.Held || s.TTL != 0 || s.Waiters != 0 || (s.FencingCounter >= 1) != counted {
			t.Fatalf("not a free lock (counted: %v): %+v", counted, s)
		}
		if !strings.Contains(s.Node, "127.0.0.1") || strings.Contains(s.Node, "@") {
			t.Fatalf("the node, without credentials: %q", s.Node)
		}
	}
}

// Each node's view: free, held with a waiter in line (ttl, counter, one
// waiter on every node), handed on to the waiter, released.
func TestInspectShowsHeldReleasedAndWaiting(t *testing.T) {
	t.Parallel()
	sets := []struct {
		name  string
		nodes func(testing.TB) *nodes
	}{
		{"one node", oneNode},
		{"three nodes", func(t testing.TB) *nodes { return startNodes(t, "--nodes", "3") }},
	}
	for _, set := range sets {
		t.Run(set.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := set.nodes(t)
			holder, other := newClient(t, n.URLs), newClient(t, n.URLs)
			resource := unique(t)
			states, err := holder.Inspect(ctx, resource)
			if err != nil {
				t.Fatal(err)
			}
			checkFree(t, states, len(n.URLs), false)

			const ttl = 5 * time.Second
			lock, err := holder.Acquire(ctx, resource, ttl)
			if err != nil {
				t.Fatal(err)
			}
			waited := make(chan *Lock, 1)
			go func() {
				l, err := other.Acquire(ctx, resource, ttl, WithWait(20*time.Second))
				if err != nil {
					t.Errorf("the waiter: %v", err)
				}
				waited <- l
			}()
			held := inspectUntil(t, holder, resource, "held with one waiter on every node", func(states []NodeLockState) bool {
				return every(states, func(s NodeLockState) bool { return s.Held && s.Waiters == 1 })
			})
			for _, s := range held {
				if s.Error != "" || s.TTL <= 0 || s.TTL > ttl || s.FencingCounter < 1 || s.FencingCounter > lock.FencingToken() {
					t.Fatalf("held (token %d): %+v", lock.FencingToken(), s)
				}
			}
			if got := highestCounter(held); got != lock.FencingToken() {
				t.Fatalf("the highest counter is %d, the token %d", got, lock.FencingToken())
			}

			if err := lock.Release(ctx); err != nil {
				t.Fatal(err)
			}
			next := <-waited
			if next == nil {
				t.FailNow()
			}
			if next.FencingToken() <= lock.FencingToken() {
				t.Fatalf("the waiter's token %d is not above %d", next.FencingToken(), lock.FencingToken())
			}
			handedOn, err := holder.Inspect(ctx, resource)
			if err != nil {
				t.Fatal(err)
			}
			holding := 0
			for _, s := range handedOn {
				if s.Held {
					holding++
				}
			}
			if holding <= len(n.URLs)/2 || highestCounter(handedOn) != next.FencingToken() {
				t.Fatalf("handed on (token %d): %+v", next.FencingToken(), handedOn)
			}

			if err := next.Release(ctx); err != nil {
				t.Fatal(err)
			}
			released := inspectUntil(t, holder, resource, "free on every node", func(states []NodeLockState) bool {
				return every(states, func(s NodeLockState) bool { return !s.Held && s.Waiters == 0 })
			})
			checkFree(t, released, len(n.URLs), true)
		})
	}
}

// A node that does not answer is an entry with its error; the call succeeds.
func TestInspectShowsANodeThatDoesNotAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := startNodes(t, "--nodes", "3")
	c := newClient(t, n.URLs)
	resource := unique(t)
	lock, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release(ctx)
	inspectUntil(t, c, resource, "held on every node", func(states []NodeLockState) bool {
		return every(states, func(s NodeLockState) bool { return s.Held })
	})
	n.run(t, "kill 2")
	states, err := c.Inspect(ctx, resource)
	if err != nil {
		t.Fatalf("Inspect with a node down: %v", err)
	}
	if len(states) != 3 || states[0].Error != "" || !states[0].Held || states[1].Error != "" || !states[1].Held {
		t.Fatalf("the live nodes: %+v", states)
	}
	down := states[2]
	if down.Error == "" || down.Node != n.URLs[2] || down.Held || down.TTL != 0 || down.FencingCounter != 0 || down.Waiters != 0 {
		t.Fatalf("the dead node %s: %+v", n.URLs[2], down)
	}
}

// With its node paused (SIGSTOP), FencedGet, Holders, Inspect and
// NewClientContext wait for their 5 s timeouts; a context cancelled or
// past its deadline ends each at once, with the context's error.
func TestContextEndsReadsAndConnectingInFlight(t *testing.T) {
	t.Parallel()
	n := startNodes(t, "--nodes", "1")
	slow := []Option{WithNodeTimeout(5 * time.Second), WithConnectTimeout(5 * time.Second)}
	c := newClient(t, n.URLs, slow...)
	resource := unique(t)
	calls := []struct {
		name string
		call func(context.Context) error
	}{
		{"FencedGet", func(ctx context.Context) error { _, _, err := c.FencedGet(ctx, resource); return err }},
		{"Holders", func(ctx context.Context) error { _, err := c.Semaphore(resource, 2).Holders(ctx); return err }},
		{"Inspect", func(ctx context.Context) error { _, err := c.Inspect(ctx, resource); return err }},
		{"NewClientContext", func(ctx context.Context) error {
			client, err := NewClientContext(ctx, n.URLs, slow...)
			if err == nil {
				_ = client.Close()
			}
			return err
		}},
	}

	n.run(t, "pause 0")
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			n.run(t, "resume 0")
		}
	}
	defer resume()
	type outcome struct {
		err  error
		took time.Duration
	}
	ends := map[string]func() (context.Context, context.CancelFunc){
		"cancelled": func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(150*time.Millisecond, cancel)
			return ctx, cancel
		},
		"deadline": func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 150*time.Millisecond)
		},
	}
	outcomes := make(map[string]chan outcome)
	for _, tc := range calls {
		for end, makeCtx := range ends {
			done := make(chan outcome, 1)
			outcomes[tc.name+" "+end] = done
			go func() {
				ctx, cancel := makeCtx()
				defer cancel()
				start := time.Now()
				err := tc.call(ctx)
				done <- outcome{err, time.Since(start)}
			}()
		}
	}
	got := make(map[string]outcome)
	for name, done := range outcomes {
		select {
		case o := <-done:
			got[name] = o
		case <-time.After(10 * time.Second):
			t.Errorf("%s did not return", name)
		}
	}
	resume()
	for _, tc := range calls {
		for end := range ends {
			name := tc.name + " " + end
			o, ok := got[name]
			if !ok {
				continue
			}
			want, kind := error(context.Canceled), ErrCancelled
			if end == "deadline" {
				want, kind = context.DeadlineExceeded, ErrTimeout
			}
			if !errors.Is(o.err, want) || !errors.Is(o.err, kind) {
				t.Errorf("%s: %v; want %v and %v", name, o.err, want, kind)
			}
			// The node answers nothing for 5 s: only the context ends the call this early.
			if o.took < 100*time.Millisecond || o.took > 2*time.Second {
				t.Errorf("%s returned after %v; want about 150 ms", name, o.took)
			}
		}
	}

	// Resumed, the same calls answer.
	for _, tc := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := tc.call(ctx); err != nil {
			t.Errorf("%s after resume: %v", tc.name, err)
		}
		cancel()
	}
	// Already cancelled: nothing starts.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range calls {
		if err := tc.call(ctx); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v", tc.name, err)
		}
	}
}
