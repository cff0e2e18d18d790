package fencelock

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestAcquireTryReleaseExtend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := oneNode(t)
	a, b := newClient(t, n.URLs), newClient(t, n.URLs)
	resource := unique(t)

	lock, err := a.Acquire(ctx, resource, 2*time.Second, WithWait(time.Second))
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if !lock.IsHeld() || lock.Resource() != resource || lock.FencingToken() == 0 {
		t.Fatalf("a fresh lock: held %v, resource %q, token %d", lock.IsHeld(), lock.Resource(), lock.FencingToken())
	}
	if f := lock.Fence(); f.Token != lock.FencingToken() || f.Holder == 0 {
		t.Fatalf("Fence() = %+v with token %d", f, lock.FencingToken())
	}
	if _, ok := lock.Permit(); ok {
		t.Fatal("a plain lock says it is a permit")
	}
	if r := lock.Remaining(); r <= 0 || r > 2*time.Second {
		t.Fatalf("Remaining() = %v for a 2 s ttl", r)
	}

	if other, err := b.TryAcquire(ctx, resource, time.Second); !errors.Is(err, ErrNotAcquired) || other != nil {
		t.Fatalf("TryAcquire of a held lock = %v, %v; want ErrNotAcquired", other, err)
	}
	start := time.Now()
	if _, err := b.Acquire(ctx, resource, time.Second, WithWait(150*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Acquire with a 150 ms wait of a held lock: %v; want ErrTimeout", err)
	}
	if waited := time.Since(start); waited < 140*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("the 150 ms wait took %v", waited)
	}
	// The timed-out waiter has left the queue when Acquire returns: a release
	// made next is not handed to it.
	if queued := n.call(t, 0, "ZCARD", "fencelock:{"+resource+"}:queue"); queued != "0" {
		t.Fatalf("the timed-out waiter is still in line: ZCARD %s", queued)
	}

	if err := lock.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if ms := n.call(t, 0, "PTTL", "fencelock:{"+resource+"}"); len(ms) < 5 {
		t.Fatalf("PTTL after extending to 20 s: %s ms", ms)
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if lock.IsHeld() || lock.Remaining() != 0 {
		t.Fatal("a released lock says it is held")
	}
	if err := lock.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("second Release: %v; want ErrNotHeld", err)
	}
	if err := lock.Extend(ctx, time.Second); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Extend after Release: %v; want ErrNotHeld", err)
	}
	if got := n.call(t, 0, "EXISTS", "fencelock:{"+resource+"}"); got != "0" {
		t.Fatalf("the key exists after Release: %s", got)
	}
	again, err := b.TryAcquire(ctx, resource, time.Second)
	if err != nil {
		t.Fatalf("TryAcquire after Release: %v", err)
	}
	if again.FencingToken() <= lock.FencingToken() {
		t.Fatalf("token %d after %d", again.FencingToken(), lock.FencingToken())
	}
	if err := again.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

// Tokens rise strictly in grant order, and the lock excludes: goroutines on
// three clients do a non-atomic read-modify-write under it.
func TestTokensStrictlyIncreaseUnderContention(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := oneNode(t)
	resource := unique(t)
	clients := []*Client{newClient(t, n.URLs), newClient(t, n.URLs), newClient(t, n.URLs)}
	var (
		mu      sync.Mutex
		tokens  []uint64
		counter int
		inside  atomic.Int32
		wg      sync.WaitGroup
	)
	const workers, rounds = 6, 5
	errs := make(chan error, workers*rounds)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(c *Client) {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				lock, err := c.Acquire(ctx, resource, 5*time.Second, WithWait(20*time.Second))
				if err != nil {
					errs <- err
					return
				}
				if inside.Add(1) != 1 {
					errs <- errors.New("two holders at once")
				}
				mu.Lock()
				tokens = append(tokens, lock.FencingToken())
				value := counter
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				counter = value + 1
				mu.Unlock()
				inside.Add(-1)
				if err := lock.Release(ctx); err != nil {
					errs <- err
				}
			}
		}(clients[w%len(clients)])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if counter != workers*rounds {
		t.Fatalf("counter %d, want %d", counter, workers*rounds)
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("tokens not strictly increasing in grant order: %v", tokens)
		}
	}
}

// A waiting Acquire ends promptly when its context does, wraps ctx.Err(),
// and leaves nothing held or queued.
func TestAcquireCancelledByContext(t *testing.T) {
	t.Parallel()
	n := oneNode(t)
	holder, waiter := newClient(t, n.URLs), newClient(t, n.URLs)
	resource := unique(t)
	lock, err := holder.Acquire(context.Background(), resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		l, err := waiter.Acquire(ctx, resource, 5*time.Second)
		if l != nil {
			err = errors.New("the cancelled acquire returned a lock")
		}
		done <- err
	}()
	// In line (the waiter's queue entry is there), then cancelled.
	queue := "fencelock:{" + resource + "}:queue"
	for deadline := time.Now().Add(5 * time.Second); n.call(t, 0, "ZCARD", queue) == "0"; {
		if time.Now().After(deadline) {
			t.Fatal("the waiter never queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	cancelled := time.Now()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrCancelled) {
			t.Fatalf("cancelled Acquire: %v; want context.Canceled and ErrCancelled", err)
		}
		if took := time.Since(cancelled); took > time.Second {
			t.Fatalf("the cancelled Acquire returned %v after cancel", took)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled Acquire did not return")
	}
	// The waiter leaves the queue in the background (LEAVE; at worst its
	// place's lease runs out).
	leftTheQueue := func(who string) {
		for deadline := time.Now().Add(3 * time.Second); n.call(t, 0, "ZCARD", queue) != "0"; {
			if time.Now().After(deadline) {
				t.Fatalf("the %s waiter is still queued", who)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	leftTheQueue("cancelled")

	// A deadline: ErrTimeout and context.DeadlineExceeded. It bounds the
	// wait as WithWait does, so the waiter has left the queue by the time
	// Acquire returns: a release made next is not handed to it.
	short, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer stop()
	if _, err := waiter.Acquire(short, resource, 5*time.Second); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) {
		t.Fatalf("Acquire past its deadline: %v", err)
	}
	if queued := n.call(t, 0, "ZCARD", queue); queued != "0" {
		t.Fatalf("%s waiter(s) still queued when the Acquire past its deadline returned", queued)
	}
	// Already cancelled: nothing starts.
	if _, err := waiter.Acquire(ctx, resource, 5*time.Second); !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with a cancelled context: %v", err)
	}

	if err := lock.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Nothing held: the next one-shot attempt wins at once.
	next, err := waiter.TryAcquire(context.Background(), resource, time.Second)
	if err != nil {
		t.Fatalf("TryAcquire after the holder released: %v", err)
	}
	_ = next.Release(context.Background())
	if m, err := waiter.Metrics(); err != nil || m.Waiting != 0 || m.Held != 0 {
		t.Fatalf("metrics after cancelled waits: %+v, %v", m, err)
	}
}

// A ctx deadline bounds an Acquire's wait as WithWait does: the waiter has
// left the queue by the time Acquire returns, so a release made next is not
// handed to a waiter that is gone, even when the node is slow to answer its
// leave (here it pauses writes, scripts among them, across the deadline).
// A cancelled ctx leaves in the background instead.
func TestAcquirePastItsDeadlineHasLeftTheQueue(t *testing.T) {
	t.Parallel()
	n := startNodes(t, "--nodes", "1") // its own node: it pauses
	holder, waiter := newClient(t, n.URLs), newClient(t, n.URLs)
	resource := unique(t)
	lock, err := holder.Acquire(context.Background(), resource, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	queue := "fencelock:{" + resource + "}:queue"
	calls := map[string]func(ctx context.Context) error{
		"Acquire": func(ctx context.Context) error {
			_, err := waiter.Acquire(ctx, resource, 5*time.Second)
			return err
		},
		// An election is a lock on its name: the holder leads.
		"Campaign": func(ctx context.Context) error {
			_, err := waiter.Campaign(ctx, resource, 5*time.Second, []byte("w"))
			return err
		},
	}
	for name, call := range calls {
		ctx, stop := context.WithTimeout(context.Background(), 400*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		for n.call(t, 0, "ZCARD", queue) == "0" {
			if ctx.Err() != nil {
				t.Fatalf("%s: the waiter never queued", name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		n.call(t, 0, "CLIENT", "PAUSE", "800", "WRITE")
		err := <-done
		stop()
		if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, ErrTimeout) {
			t.Fatalf("%s past its deadline: %v; want context.DeadlineExceeded and ErrTimeout", name, err)
		}
		if queued := n.call(t, 0, "ZCARD", queue); queued != "0" {
			t.Fatalf("%s waiter(s) still queued when the %s past its deadline returned", queued, name)
		}
	}
	if err := lock.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// Deleting the key is seen by the next renewal: Lost fires with "deleted".
func TestLostFiresWhenTheKeyIsDeleted(t *testing.T) {
	t.Parallel()
	n := oneNode(t)
	c := newClient(t, n.URLs)
	resource := unique(t)
	lock, err := c.Acquire(context.Background(), resource, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if _, lost := lock.LossReason(); lost {
		t.Fatal("a fresh lock says it was lost")
	}
	n.call(t, 0, "DEL", "fencelock:{"+resource+"}")
	select {
	case reason := <-lock.Lost():
		if reason != LossDeleted {
			t.Fatalf("lost with %v, want deleted", reason)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Lost did not fire within 3 s of the delete")
	}
	if _, open := <-lock.Lost(); open {
		t.Fatal("Lost was not closed after its reason")
	}
	if reason, lost := lock.LossReason(); !lost || reason != LossDeleted {
		t.Fatalf("LossReason() = %v, %v", reason, lost)
	}
	if lock.IsHeld() {
		t.Fatal("a lost lock says it is held")
	}
	if err := lock.Extend(context.Background(), time.Second); !errors.Is(err, ErrLost) && !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Extend of a lost lock: %v", err)
	}
	if err := lock.Release(context.Background()); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("Release of a lost lock: %v; want ErrNotHeld", err)
	}
	if m, err := c.Metrics(); err != nil || m.Lost[LossDeleted] != 1 {
		t.Fatalf("metrics: lost %v, %v", m.Lost, err)
	}
}

// Without auto-renewal the lease ends at its ttl: Lost says "expired".
func TestLostFiresWhenTheLeaseExpires(t *testing.T) {
	t.Parallel()
	c := newClient(t, oneNode(t).URLs)
	lock, err := c.Acquire(context.Background(), unique(t), 100*time.Millisecond, LockAutoRenew(false))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case reason := <-lock.Lost():
		if reason != LossExpired {
			t.Fatalf("lost with %v, want expired", reason)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Lost did not fire after the lease ran out")
	}
	_ = lock.Release(context.Background())
}

// Redlock on 3 nodes: one node down still decides; two down is
// ErrUnavailable with a report from every node.
func TestQuorumOnThreeNodesWithOneKilled(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	n := startNodes(t, "--nodes", "3")
	c := newClient(t, n.URLs, WithNodeTimeout(200*time.Millisecond))
	resource := unique(t)
	n.run(t, "kill 2")
	lock, err := c.Acquire(ctx, resource, 2*time.Second, WithWait(2*time.Second))
	if err != nil {
		t.Fatalf("Acquire with 2 of 3 nodes: %v", err)
	}
	if !lock.IsHeld() {
		t.Fatal("not held with 2 of 3 nodes")
	}
	for i := 0; i < 2; i++ {
		if got := n.call(t, i, "EXISTS", "fencelock:{"+resource+"}"); got != "1" {
			t.Fatalf("node %d lacks the key", i)
		}
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release with 2 of 3 nodes: %v", err)
	}
	second, err := c.Acquire(ctx, resource, 2*time.Second, WithWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if second.FencingToken() <= lock.FencingToken() {
		t.Fatalf("token %d after %d", second.FencingToken(), lock.FencingToken())
	}
	_ = second.Release(ctx)

	n.run(t, "kill 1")
	_, err = c.TryAcquire(ctx, unique(t), time.Second)
	var e *Error
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &e) {
		t.Fatalf("TryAcquire with 1 of 3 nodes: %v; want ErrUnavailable", err)
	}
	if len(e.Nodes) != 3 {
		t.Fatalf("%d node reports, want 3: %+v", len(e.Nodes), e.Nodes)
	}
	failed := 0
	for _, report := range e.Nodes {
		if report.Node == "" {
			t.Fatalf("a report without its node: %+v", report)
		}
		if report.Outcome == NodeFailed || report.Outcome == NodeTimedOut {
			failed++
		}
	}
	if failed < 2 {
		t.Fatalf("reports: %+v; want the two dead nodes failed or timed out", e.Nodes)
	}
}

// Fair waiters are served in arrival order. Not parallel: a waiter starved
// of CPU past its 1 s place lease may drop out of line, as the protocol says.
//
// The waiters share one client, and the order is checked once that client
// listens for wake-ups: the core subscribes when a client's first waiter is
// refused, and a release that finds no listener on a waiter's channel
// takes it for gone and drops it from the line (docs/protocol.md §3.2), so
// a release in that first moment can let a later waiter in first (seen here
// under load: served 2 then 1).
func TestFairWaitersAreServedInOrder(t *testing.T) {
	ctx := context.Background()
	n := oneNode(t)
	c := newClient(t, n.URLs)
	resource := unique(t)
	lock, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan int, 2)
	queue := "fencelock:{" + resource + "}:queue"
	var wg sync.WaitGroup
	for i := 1; i <= 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.Acquire(ctx, resource, 5*time.Second, WithFair(), WithWait(10*time.Second))
			if err != nil {
				t.Error(err)
				return
			}
			order <- i
			time.Sleep(20 * time.Millisecond)
			_ = l.Release(ctx)
		}()
		for deadline := time.Now().Add(5 * time.Second); n.call(t, 0, "ZCARD", queue) != strconv.Itoa(i); {
			if time.Now().After(deadline) {
				t.Fatalf("waiter %d never queued", i)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if i == 1 { // the client listens on fencelock:wake:<client id>, the waiter id's first 32 characters
			waiter := n.call(t, 0, "ZRANGE", queue, "0", "0")
			channel := "fencelock:wake:" + waiter[:min(32, len(waiter))]
			for deadline := time.Now().Add(5 * time.Second); n.call(t, 0, "PUBSUB", "NUMSUB", channel) != channel+" 1"; {
				if time.Now().After(deadline) {
					t.Fatalf("the client never listened on %s", channel)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	_ = lock.Release(ctx)
	wg.Wait()
	if first, second := <-order, <-order; first != 1 || second != 2 {
		t.Fatalf("served %d then %d; want 1 then 2", first, second)
	}
}

// Locks outlive their client's Close; the closed client refuses work.
func TestClientClose(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, err := NewClient(oneNode(t).URLs)
	if err != nil {
		t.Fatal(err)
	}
	lock, err := c.Acquire(ctx, unique(t), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := c.TryAcquire(ctx, unique(t), time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("TryAcquire on a closed client: %v", err)
	}
	if _, err := c.Metrics(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Metrics on a closed client: %v", err)
	}
	if _, err := c.Inspect(ctx, unique(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Inspect on a closed client: %v", err)
	}
	if _, _, err := c.FencedGet(ctx, unique(t)); !errors.Is(err, ErrClosed) {
		t.Fatalf("FencedGet on a closed client: %v", err)
	}
	if !lock.IsHeld() {
		t.Fatal("the lock was dropped with its client")
	}
	if err := lock.Release(ctx); err != nil {
		t.Fatalf("Release after the client closed: %v", err)
	}
}

// A Lock dropped without Release is freed when garbage-collected: renewal
// stops and its key expires at the ttl.
func TestDroppedLockStopsRenewing(t *testing.T) {
	t.Parallel()
	n := oneNode(t)
	c := newClient(t, n.URLs)
	resource := unique(t)
	func() {
		lock, err := c.Acquire(context.Background(), resource, 200*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		_ = lock.FencingToken()
	}()
	key := "fencelock:{" + resource + "}"
	for deadline := time.Now().Add(5 * time.Second); n.call(t, 0, "EXISTS", key) != "0"; {
		if time.Now().After(deadline) {
			t.Fatal("a dropped lock is still renewed after 5 s")
		}
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
}

// Many acquires cancelled at random moments (waiting, just granted, not yet
// started) leave nothing held and nothing queued.
func TestCancelledAcquiresLeaveNothingHeld(t *testing.T) {
	t.Parallel()
	n := oneNode(t)
	c := newClient(t, n.URLs)
	resource := unique(t)
	holder, err := c.Acquire(context.Background(), resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var granted atomic.Int32
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Duration(i%8)*3*time.Millisecond)
			defer cancel()
			if i == 20 {
				_ = holder.Release(context.Background()) // some waiters may win now
			}
			lock, err := c.Acquire(ctx, resource, 5*time.Second)
			if err == nil {
				granted.Add(1)
				_ = lock.Release(context.Background())
			} else if !errors.Is(err, ErrTimeout) && !errors.Is(err, ErrCancelled) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	_ = holder.Release(context.Background())
	lock, err := c.Acquire(context.Background(), resource, time.Second, WithWait(5*time.Second))
	if err != nil {
		t.Fatalf("the lock after the storm (%d granted): %v", granted.Load(), err)
	}
	_ = lock.Release(context.Background())
	for deadline := time.Now().Add(3 * time.Second); n.call(t, 0, "ZCARD", "fencelock:{"+resource+"}:queue") != "0"; {
		if time.Now().After(deadline) {
			t.Fatal("cancelled waiters are still queued")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m, _ := c.Metrics(); m.Held != 0 || m.Waiting != 0 {
		t.Fatalf("held %d, waiting %d after the storm", m.Held, m.Waiting)
	}
}
