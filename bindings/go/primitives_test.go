package fencelock

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// N goroutines on several clients never hold more than the permits at once,
// and two holders at once never share a permit number.
func TestSemaphoreNeverOverAdmits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := oneNode(t)
	name := unique(t)
	const permits, workers, rounds = 2, 8, 3
	clients := []*Client{newClient(t, n.URLs), newClient(t, n.URLs)}
	var (
		inside, most atomic.Int32
		numbers      sync.Map // permit number -> held now
		wg           sync.WaitGroup
		maxHolders   atomic.Int64
	)
	errs := make(chan error, workers*rounds)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(sem *Semaphore) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				permit, err := sem.Acquire(ctx, 5*time.Second, WithWait(20*time.Second))
				if err != nil {
					errs <- err
					return
				}
				number, ok := permit.Permit()
				if !ok || number < 0 || number >= permits {
					errs <- errors.New("permit number " + strconv.Itoa(number) + " out of range")
				}
				if _, taken := numbers.LoadOrStore(number, true); taken {
					errs <- errors.New("two holders of permit " + strconv.Itoa(number))
				}
				now := inside.Add(1)
				for old := most.Load(); now > old && !most.CompareAndSwap(old, now); old = most.Load() {
				}
				if holders, err := sem.Holders(ctx); err == nil && int64(holders) > maxHolders.Load() {
					maxHolders.Store(int64(holders))
				}
				time.Sleep(5 * time.Millisecond)
				inside.Add(-1)
				numbers.Delete(number)
				if err := permit.Release(ctx); err != nil {
					errs <- err
				}
			}
		}(clients[w%2].Semaphore(name, permits))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m := most.Load(); m > permits || m < 1 {
		t.Fatalf("%d holders at once with %d permits", m, permits)
	}
	if h := maxHolders.Load(); h > permits {
		t.Fatalf("Holders() said %d with %d permits", h, permits)
	}
	sem := clients[0].Semaphore(name, permits)
	if sem.Name() != name || sem.Permits() != permits {
		t.Fatal("Name/Permits")
	}
	if holders, err := sem.Holders(ctx); err != nil || holders != 0 {
		t.Fatalf("Holders() after every release = %d, %v", holders, err)
	}
	// Both permits are taken with a wait: the last release of a client
	// that looped may keep its permit for that client a few milliseconds
	// (a lingering release, docs/protocol.md §4.9) before handing it on.
	a, err1 := sem.Acquire(ctx, 5*time.Second, WithWait(2*time.Second))
	b, err2 := sem.Acquire(ctx, 5*time.Second, WithWait(2*time.Second))
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	// Full: TryAcquire is ErrNotAcquired; another permit count is refused.
	if _, err := sem.TryAcquire(ctx, 5*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryAcquire of a full semaphore: %v", err)
	}
	if _, err := clients[1].Semaphore(name, 3).TryAcquire(ctx, 5*time.Second); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("another permit count: %v; want ErrInvalidArgument", err)
	}
	_ = a.Release(ctx)
	_ = b.Release(ctx)
}

// Readers share, a writer excludes, and the writer's token is above the
// readers'.
func TestRWLockReadersShareWriterExcludes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := oneNode(t)
	a, b := newClient(t, n.URLs), newClient(t, n.URLs)
	name := unique(t)
	rwA, rwB := a.RWLock(name), b.RWLock(name)
	if rwA.Name() != name {
		t.Fatal("Name")
	}
	r1, err := rwA.AcquireRead(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := rwB.TryRead(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("a second reader beside the first: %v", err)
	}
	if _, err := rwB.TryWrite(ctx, 5*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryWrite beside readers: %v; want ErrNotAcquired", err)
	}
	// A writer waits for both readers.
	wrote := make(chan *Lock, 1)
	go func() {
		w, err := rwB.AcquireWrite(ctx, 5*time.Second, WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		wrote <- w
	}()
	// Waiting: in the node's set of waiting writers.
	writers := "fencelock:{" + name + "}:rw:writers"
	for deadline := time.Now().Add(5 * time.Second); n.call(t, 0, "ZCARD", writers) == "0"; {
		if time.Now().After(deadline) {
			t.Fatal("the writer never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case <-wrote:
		t.Fatal("the writer went in beside readers")
	default:
	}
	// A waiting writer is not overtaken by a later reader.
	if _, err := rwA.TryRead(ctx, 5*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryRead while a writer waits: %v; want ErrNotAcquired", err)
	}
	_ = r1.Release(ctx)
	_ = r2.Release(ctx)
	var w *Lock
	select {
	case w = <-wrote:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer was not let in after the readers left")
	}
	if w == nil {
		t.FailNow()
	}
	if w.FencingToken() <= r1.FencingToken() || w.FencingToken() <= r2.FencingToken() {
		t.Fatalf("writer token %d, readers %d and %d", w.FencingToken(), r1.FencingToken(), r2.FencingToken())
	}
	if _, err := rwA.TryRead(ctx, 5*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryRead beside a writer: %v", err)
	}
	if _, err := rwA.TryWrite(ctx, 5*time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryWrite beside a writer: %v", err)
	}
	if err := w.Release(ctx); err != nil {
		t.Fatal(err)
	}
	r3, err := rwA.TryRead(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("TryRead after the writer left: %v", err)
	}
	_ = r3.Release(ctx)
}

// A paused former holder's write carries an older token and is refused.
func TestFencedStaleWriteRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, oneNode(t).URLs)
	resource, key := unique(t), "stock:"+unique(t)
	if _, found, err := c.FencedGet(ctx, key); err != nil || found {
		t.Fatalf("FencedGet of a new key: found %v, %v", found, err)
	}
	slow, err := c.Acquire(ctx, resource, 100*time.Millisecond, LockAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	<-slow.Lost() // paused past its lease
	fast, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FencedSet(ctx, key, "9", fast.Fence()); err != nil {
		t.Fatalf("the new holder's write: %v", err)
	}
	if err := c.FencedSet(ctx, key, "8", fast.Fence()); err != nil {
		t.Fatalf("the new holder's second write: %v", err)
	}
	if err := c.FencedSet(ctx, key, "10", slow.Fence()); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("the stale holder's write: %v; want ErrStaleToken", err)
	}
	if err := c.FencedSet(ctx, key, "10", Fence{Token: fast.FencingToken()}); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("a bare equal token: %v; want ErrStaleToken", err)
	}
	got, found, err := c.FencedGet(ctx, key)
	if err != nil || !found || got.Value != "8" || got.Token != fast.FencingToken() {
		t.Fatalf("FencedGet = %+v, %v, %v; want 8 by token %d", got, found, err, fast.FencingToken())
	}
	_ = fast.Release(ctx)
	_ = slow.Release(ctx)
}

// An election: the leader is observed, a second candidate waits, wins on
// resign with a higher epoch, and is observed too.
func TestElectionCampaignObserveResign(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := oneNode(t)
	a, b := newClient(t, n.URLs), newClient(t, n.URLs)
	name := unique(t)
	observation, err := b.Observe(name)
	if err != nil {
		t.Fatal(err)
	}
	defer observation.Close()

	first, err := a.Campaign(ctx, name, 2*time.Second, []byte("a"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Value(), []byte("a")) || first.Epoch() != first.FencingToken() {
		t.Fatalf("leadership %v value %q", first.Lock, first.Value())
	}
	within, stop := context.WithTimeout(ctx, 5*time.Second)
	defer stop()
	leader, err := observation.Next(within)
	if err != nil || string(leader.Value) != "a" || leader.Epoch != first.Epoch() {
		t.Fatalf("observed %+v, %v; want a at epoch %d", leader, err, first.Epoch())
	}
	if _, err := b.Campaign(ctx, name, 2*time.Second, []byte("b"), WithWait(0)); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a one-attempt campaign against a leader: %v", err)
	}
	won := make(chan *Leadership, 1)
	go func() {
		second, err := b.Campaign(ctx, name, 2*time.Second, []byte("b"), WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		won <- second
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	var second *Leadership
	select {
	case second = <-won:
	case <-time.After(5 * time.Second):
		t.Fatal("the second candidate did not win after the resign")
	}
	if second == nil {
		t.FailNow()
	}
	if second.Epoch() <= first.Epoch() {
		t.Fatalf("epoch %d after %d", second.Epoch(), first.Epoch())
	}
	for leader, err := range observation.Leaders(within) {
		if err != nil {
			t.Fatal(err)
		}
		if string(leader.Value) == "b" {
			if leader.Epoch != second.Epoch() {
				t.Fatalf("observed b at %d, it won at %d", leader.Epoch, second.Epoch())
			}
			break
		}
	}
	if within.Err() != nil {
		t.Fatal("the observer never saw b")
	}
	_ = second.Resign(ctx)

	// Close ends a waiting Next with ErrClosed.
	waiting := make(chan error, 1)
	go func() { _, err := observation.Next(ctx); waiting <- err }()
	time.Sleep(50 * time.Millisecond)
	_ = observation.Close()
	select {
	case err := <-waiting:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("Next ended by Close: %v; want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end a waiting Next")
	}
	if _, err := observation.Next(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
}

func TestMetricsCountAcquisitions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, oneNode(t).URLs)
	resource := unique(t)
	lock, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TryAcquire(ctx, resource, time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatal(err)
	}
	m, err := c.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if m.Acquired != 1 || m.Held != 1 || m.Failed[KindNotAcquired] != 1 || m.AcquireLatency.Count != 2 {
		t.Fatalf("after one acquire and one refusal: %+v", m)
	}
	if _, ok := m.Failed[KindTimeout]; !ok {
		t.Fatal("Failed lacks a kind with zero failures")
	}
	if len(m.AcquireLatency.Buckets) != len(LatencyBounds()) || m.AcquireLatency.P50 <= 0 {
		t.Fatalf("latency %+v", m.AcquireLatency)
	}
	_ = lock.Release(ctx)
	if m, _ = c.Metrics(); m.Released != 1 || m.Held != 0 {
		t.Fatalf("after the release: %+v", m)
	}
}
