package fencelock

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// vectors reads tests/vectors/protocol.json ($FENCELOCK_VECTORS, else the
// repository's copy).
func vectors(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	path := os.Getenv("FENCELOCK_VECTORS")
	if path == "" {
		path = "../../tests/vectors/protocol.json"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("no vectors: %v", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		t.Fatal(err)
	}
	return all
}

func decode(t *testing.T, raw json.RawMessage, into any) {
	t.Helper()
	if err := json.Unmarshal(raw, into); err != nil {
		t.Fatal(err)
	}
}

// The Go tables against the shared ones: error kinds (name, code, C status,
// one sentinel each), loss reasons, node outcomes, log levels, limits and
// the metrics' fields and latency buckets.
func TestVectorsTablesMatch(t *testing.T) {
	v := vectors(t)

	var kinds []struct {
		Name    string `json:"name"`
		Code    int    `json:"code"`
		CStatus string `json:"c_status"`
	}
	decode(t, v["error_kinds"], &kinds)
	if len(kinds) != len(kindNames) || len(kinds) != len(sentinels) {
		t.Fatalf("%d kinds in the vectors, %d Kind names, %d sentinels", len(kinds), len(kindNames), len(sentinels))
	}
	for _, k := range kinds {
		kind := Kind(k.Code)
		if kind.String() != k.Name {
			t.Errorf("Kind(%d) is %q, the vectors say %q", k.Code, kind, k.Name)
		}
		if got := statusName(int32(k.Code)); got != k.CStatus {
			t.Errorf("code %d is %s in C, the vectors say %s", k.Code, got, k.CStatus)
		}
		s, ok := sentinels[kind]
		if !ok {
			t.Errorf("no sentinel for %s", k.Name)
			continue
		}
		err := error(&Error{Kind: kind, Message: "x"})
		if !errors.Is(err, s) {
			t.Errorf("errors.Is(an error of kind %s, its sentinel) is false", k.Name)
		}
		for other, o := range sentinels {
			if other != kind && errors.Is(err, o) {
				t.Errorf("an error of kind %s matches the sentinel of %s", k.Name, other)
			}
		}
		if kindOfStatus(cStatus(k.Code)) != kind {
			t.Errorf("status %d maps to %v", k.Code, kindOfStatus(cStatus(k.Code)))
		}
	}

	var reasons []struct {
		Name   string `json:"name"`
		CValue int    `json:"c_value"`
	}
	decode(t, v["loss_reasons"], &reasons)
	if len(reasons) != len(lossReasonNames)-1 { // LossOther is this front's
		t.Errorf("%d loss reasons in the vectors, %d here (besides other)", len(reasons), len(lossReasonNames)-1)
	}
	for _, r := range reasons {
		if LossReason(r.CValue).String() != r.Name {
			t.Errorf("LossReason(%d) is %q, the vectors say %q", r.CValue, LossReason(r.CValue), r.Name)
		}
	}

	var outcomes []struct {
		Name   string `json:"name"`
		CValue int    `json:"c_value"`
	}
	decode(t, v["node_outcomes"], &outcomes)
	if len(outcomes) != nodeOutcomeCount {
		t.Errorf("%d node outcomes in the vectors, %d here", len(outcomes), nodeOutcomeCount)
	}
	for _, o := range outcomes {
		if NodeOutcome(o.CValue).String() != o.Name {
			t.Errorf("NodeOutcome(%d) is %q, the vectors say %q", o.CValue, NodeOutcome(o.CValue), o.Name)
		}
	}

	var levels []struct {
		Name   string `json:"name"`
		CValue int    `json:"c_value"`
	}
	decode(t, v["log_levels"], &levels)
	if len(levels) != len(logLevels) {
		t.Fatalf("%d log levels in the vectors, %d here", len(levels), len(logLevels))
	}
	for i, l := range levels { // most severe first, here too
		if logLevels[i].name != l.Name || logLevels[i].cValue != l.CValue {
			t.Errorf("log level %d is %+v here, %+v in the vectors", i, logLevels[i], l)
		}
		if i > 0 && logLevels[i].level >= logLevels[i-1].level {
			t.Errorf("slog level of %s is not below %s's", l.Name, levels[i-1].Name)
		}
	}
	wantSlog := map[string]slog.Level{"error": slog.LevelError, "warn": slog.LevelWarn, "info": slog.LevelInfo, "debug": slog.LevelDebug, "trace": LevelTrace}
	for _, l := range levels {
		if slogLevel(l.CValue) != wantSlog[l.Name] {
			t.Errorf("%s maps to slog %v", l.Name, slogLevel(l.CValue))
		}
	}

	var raw map[string]json.Number // tokens and holder ids do not fit a float64
	dec := json.NewDecoder(strings.NewReader(string(v["limits"])))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		t.Fatal(err)
	}
	integer := func(name string) uint64 {
		n, err := strconv.ParseUint(raw[name].String(), 10, 64)
		if err != nil {
			t.Fatalf("limit %s: %v", name, err)
		}
		return n
	}
	drift, _ := raw["max_drift_factor"].Float64()
	want := Limits{
		MinTTL:              time.Duration(integer("min_ttl_ms")) * time.Millisecond,
		MaxTTL:              time.Duration(integer("max_ttl_ms")) * time.Millisecond,
		MaxWait:             time.Duration(integer("max_wait_ms")) * time.Millisecond,
		MaxResourceBytes:    int(integer("max_resource_bytes")),
		MaxPrefixBytes:      int(integer("max_prefix_bytes")),
		MaxFencingToken:     integer("max_fencing_token"),
		MaxHolderID:         integer("max_holder_id"),
		MaxDriftFactor:      drift,
		MaxLeaderValueBytes: int(integer("max_leader_value_bytes")),
		MaxPermits:          int(integer("max_permits")),
	}
	if got := GetLimits(); got != want {
		t.Errorf("GetLimits() = %+v\nthe vectors say %+v", got, want)
	}

	var metrics struct {
		Fields  []string  `json:"fields"`
		Buckets []float64 `json:"latency_buckets_seconds"`
	}
	decode(t, v["metrics"], &metrics)
	var fields []string
	for _, f := range reflect.VisibleFields(reflect.TypeOf(Metrics{})) {
		fields = append(fields, f.Name)
	}
	var want2 []string
	for _, f := range metrics.Fields {
		want2 = append(want2, pascal(f))
	}
	if strings.Join(fields, ",") != strings.Join(want2, ",") {
		t.Errorf("Metrics fields %v, the vectors' %v", fields, want2)
	}
	bounds := LatencyBounds()
	if len(bounds) != len(metrics.Buckets) {
		t.Fatalf("%d latency bounds, %d in the vectors", len(bounds), len(metrics.Buckets))
	}
	for i, s := range metrics.Buckets {
		if bounds[i] != time.Duration(math.Round(s*1e9)) {
			t.Errorf("latency bound %d is %v, the vectors say %vs", i, bounds[i], s)
		}
	}
}

// "taken_over" as Go spells a field: "TakenOver".
func pascal(name string) string {
	var b strings.Builder
	for _, part := range strings.Split(name, "_") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// errors.Is per kind on real failures, and the context's errors wrapped.
func TestErrorsIsPerKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, oneNode(t).URLs)
	resource := unique(t)
	lock, err := c.Acquire(ctx, resource, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.TryAcquire(ctx, resource, time.Second)
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindNotAcquired || !errors.Is(err, ErrNotAcquired) || errors.Is(err, ErrTimeout) {
		t.Fatalf("TryAcquire of a held lock: %#v", err)
	}
	if len(e.Nodes) != 1 || e.Nodes[0].Outcome != NodeHeldByOther || !strings.HasPrefix(e.Nodes[0].Node, "redis://") {
		t.Fatalf("node reports %+v", e.Nodes)
	}
	if !strings.HasPrefix(err.Error(), "fencelock: ") {
		t.Fatalf("message %q", err)
	}
	if _, err := c.Acquire(ctx, resource, time.Second, WithWait(50*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("want ErrTimeout: %v", err)
	}
	_ = lock.Release(ctx)
	if err := lock.Release(ctx); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("want ErrNotHeld: %v", err)
	}
	if _, err := NewClient([]string{"http://127.0.0.1:1"}); !errors.Is(err, ErrConfig) {
		t.Fatalf("a bad URL: %v; want ErrConfig", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = c.Acquire(cancelled, resource, time.Second)
	if !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("a cancelled context: %v", err)
	}
	if !errors.As(err, &e) || e.Kind != KindCancelled {
		t.Fatalf("kind of a cancelled acquire: %#v", err)
	}
	closed, _ := NewClient(oneNode(t).URLs)
	_ = closed.Close()
	if _, err := closed.Acquire(ctx, resource, time.Second); !errors.Is(err, ErrClosed) {
		t.Fatalf("a closed client: %v; want ErrClosed", err)
	}
}

// Bad input gets ErrInvalidArgument (ErrConfig for a client's options),
// with a message, and never a panic; strings with NUL bytes are refused,
// not cut short.
func TestBadInputIsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := newClient(t, oneNode(t).URLs)
	long := strings.Repeat("a", GetLimits().MaxResourceBytes+1)
	invalid := []struct {
		what string
		call func() error
	}{
		{"empty resource", func() error { _, err := c.Acquire(ctx, "", time.Second); return err }},
		{"resource starting with }", func() error { _, err := c.TryAcquire(ctx, "}x", time.Second); return err }},
		{"resource over the limit", func() error { _, err := c.TryAcquire(ctx, long, time.Second); return err }},
		{"NUL in a resource", func() error { _, err := c.TryAcquire(ctx, "a\x00b", time.Second); return err }},
		{"invalid UTF-8", func() error { _, err := c.TryAcquire(ctx, "a\xffb", time.Second); return err }},
		{"ttl 0", func() error { _, err := c.TryAcquire(ctx, "r", 0); return err }},
		{"negative ttl", func() error { _, err := c.TryAcquire(ctx, "r", -time.Second); return err }},
		{"ttl below the minimum", func() error { _, err := c.TryAcquire(ctx, "r", 9*time.Millisecond); return err }},
		{"ttl above the maximum", func() error { _, err := c.TryAcquire(ctx, "r", GetLimits().MaxTTL+time.Millisecond); return err }},
		{"negative wait", func() error { _, err := c.Acquire(ctx, "r", time.Second, WithWait(-1)); return err }},
		{"wait above the maximum", func() error {
			_, err := c.Acquire(ctx, "r", time.Second, WithWait(GetLimits().MaxWait+time.Millisecond))
			return err
		}},
		{"negative max hold", func() error { _, err := c.Acquire(ctx, "r", time.Second, WithMaxHold(-1)); return err }},
		{"negative max renewals", func() error { _, err := c.Acquire(ctx, "r", time.Second, WithMaxRenewals(-1)); return err }},
		{"0 permits", func() error { _, err := c.Semaphore("s", 0).TryAcquire(ctx, time.Second); return err }},
		{"too many permits", func() error { _, err := c.Semaphore("s", 257).Acquire(ctx, time.Second); return err }},
		{"holders of 0 permits", func() error { _, err := c.Semaphore("s", 0).Holders(ctx); return err }},
		{"empty read-write lock", func() error { _, err := c.RWLock("").TryRead(ctx, time.Second); return err }},
		{"NUL in a write lock", func() error { _, err := c.RWLock("\x00").AcquireWrite(ctx, time.Second); return err }},
		{"NUL in a fenced value", func() error { return c.FencedSet(ctx, "k", "a\x00", Fence{Token: 1}) }},
		{"empty fenced key", func() error { return c.FencedSet(ctx, "", "v", Fence{Token: 1}) }},
		{"a fenced key of a lock's form", func() error { return c.FencedSet(ctx, "fencelock:{x}", "v", Fence{Token: 1}) }},
		{"a holder id too large", func() error { return c.FencedSet(ctx, "k", "v", Fence{Token: 1, Holder: math.MaxUint64}) }},
		{"NUL in a fenced read", func() error { _, _, err := c.FencedGet(ctx, "k\x00"); return err }},
		{"an empty fenced read", func() error { _, _, err := c.FencedGet(ctx, ""); return err }},
		{"a fenced read of a lock key", func() error { _, _, err := c.FencedGet(ctx, "fencelock:{x}"); return err }},
		{"inspect of an empty resource", func() error { _, err := c.Inspect(ctx, ""); return err }},
		{"inspect of a resource starting with }", func() error { _, err := c.Inspect(ctx, "}x"); return err }},
		{"inspect of a resource over the limit", func() error { _, err := c.Inspect(ctx, long); return err }},
		{"NUL in an inspect", func() error { _, err := c.Inspect(ctx, "a\x00b"); return err }},
		{"invalid UTF-8 in an inspect", func() error { _, err := c.Inspect(ctx, "a\xffb"); return err }},
		{"a leader value too long", func() error {
			_, err := c.Campaign(ctx, "e", time.Second, make([]byte, GetLimits().MaxLeaderValueBytes+1))
			return err
		}},
		{"a campaign with lock options", func() error { _, err := c.Campaign(ctx, "e", time.Second, nil, WithFair()); return err }},
		{"NUL in an election", func() error { _, err := c.Observe("e\x00"); return err }},
		{"extend with ttl 0", func() error {
			l, err := c.Acquire(ctx, unique(t), time.Second)
			if err != nil {
				return err
			}
			defer l.Release(ctx)
			return l.Extend(ctx, 0)
		}},
	}
	for _, tc := range invalid {
		err := tc.call()
		var e *Error
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &e) || len(e.Message) < 20 {
			t.Errorf("%s: %v; want ErrInvalidArgument with a message", tc.what, err)
		}
	}

	config := []struct {
		what  string
		nodes []string
		opts  []Option
	}{
		{"no nodes", nil, nil},
		{"a bad URL", []string{"not a url"}, nil},
		{"NUL in a URL", []string{"redis://127.0.0.1:1\x00"}, nil},
		{"a duplicate node", []string{c0(t), c0(t)}, nil},
		{"NUL in the prefix", []string{c0(t)}, []Option{WithKeyPrefix("a\x00")}},
		{"braces in the prefix", []string{c0(t)}, []Option{WithKeyPrefix("a{b}")}},
		{"a zero node timeout", []string{c0(t)}, []Option{WithNodeTimeout(0)}},
		{"a negative connect timeout", []string{c0(t)}, []Option{WithConnectTimeout(-time.Second)}},
		{"a NaN drift", []string{c0(t)}, []Option{WithDrift(math.NaN())}},
		{"a drift too large", []string{c0(t)}, []Option{WithDrift(0.5)}},
		{"a retry max below its base", []string{c0(t)}, []Option{WithRetry(time.Second, time.Millisecond)}},
		{"TLS 1.1", []string{c0(t)}, []Option{WithTLSMinVersion(0x0302)}},
		{"an empty CA", []string{c0(t)}, []Option{WithTLSCA(nil)}},
		{"NUL in a password", []string{c0(t)}, []Option{WithCredentials("u", "p\x00")}},
	}
	for _, tc := range config {
		client, err := NewClient(tc.nodes, tc.opts...)
		if client != nil {
			_ = client.Close()
		}
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v; want ErrConfig", tc.what, err)
		}
	}
}

func c0(t *testing.T) string { return oneNode(t).URLs[0] }

// A slog handler that keeps what it is given.
type recordingHandler struct {
	mu      sync.Mutex
	level   slog.Level
	records []slog.Record
}

func (h *recordingHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= h.level }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}

// assertNoSecret fails if any record's message or attribute holds one of secrets.
func (h *recordingHandler) assertNoSecret(t *testing.T, secrets ...string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		text := r.Message
		r.Attrs(func(a slog.Attr) bool {
			text += " " + a.Key + "=" + a.Value.String()
			return true
		})
		for _, secret := range secrets {
			if strings.Contains(text, secret) {
				t.Fatalf("a record shows a secret: %q", text)
			}
		}
	}
	if len(h.records) == 0 {
		t.Fatal("no records to check")
	}
}

func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler      { return h }

// find is the first record with resource=resource at level.
func (h *recordingHandler) find(resource string, level slog.Level) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		found := false
		r.Attrs(func(a slog.Attr) bool {
			found = found || a.Key == "resource" && a.Value.String() == resource
			return true
		})
		if found && r.Level == level {
			return r, true
		}
	}
	return slog.Record{}, false
}

// Records reach a slog handler at the mapped levels, with their target and
// fields; a nil handler stops them.
func TestLogsForwardToSlog(t *testing.T) {
	ctx := context.Background()
	n := oneNode(t)
	// An ACL user with a password in the URL: neither the password nor the
	// lock's token may appear in any record.
	const password = "slog-Secret-7f3a"
	n.call(t, 0, "ACL", "SETUSER", "slog-app", "on", ">"+password, "~*", "&*", "+@all")
	urls := make([]string, len(n.URLs))
	for i, url := range n.URLs {
		urls[i] = strings.Replace(url, "redis://", "redis://slog-app:"+password+"@", 1)
	}
	c := newClient(t, urls)
	h := &recordingHandler{level: slog.LevelDebug}
	if err := ForwardLogs(h); err != nil {
		t.Fatal(err)
	}
	defer ForwardLogs(nil)
	resource := unique(t)
	lock, err := c.Acquire(ctx, resource, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	token := n.call(t, 0, "GET", "fencelock:{"+resource+"}")
	if token == "" {
		t.Fatal("no lock key after the grant")
	}
	n.call(t, 0, "DEL", "fencelock:{"+resource+"}")
	<-lock.Lost()
	deadline := time.Now().Add(5 * time.Second)
	var debug, warn slog.Record
	for ok1, ok2 := false, false; !(ok1 && ok2); {
		if time.Now().After(deadline) {
			t.Fatalf("no debug and warn records about %s: %d records", resource, len(h.records))
		}
		time.Sleep(10 * time.Millisecond)
		debug, ok1 = h.find(resource, slog.LevelDebug)
		warn, ok2 = h.find(resource, slog.LevelWarn)
	}
	for _, r := range []slog.Record{debug, warn} {
		target := ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "target" {
				target = a.Value.String()
			}
			return true
		})
		if !strings.HasPrefix(target, "fencelock") || r.Message == "" {
			t.Fatalf("record %q with target %q", r.Message, target)
		}
	}
	if _, ok := h.find(resource, LevelTrace); ok {
		t.Fatal("a trace record reached a handler enabled from debug")
	}
	h.assertNoSecret(t, password, token)
	_ = lock.Release(ctx)
	if err := ForwardLogs(nil); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	before := len(h.records)
	h.mu.Unlock()
	other := unique(t)
	l2, err := c.Acquire(ctx, other, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = l2.Release(ctx)
	time.Sleep(50 * time.Millisecond)
	if _, ok := h.find(other, slog.LevelDebug); ok {
		t.Fatalf("a record after ForwardLogs(nil) (%d before)", before)
	}
}

// One PostgreSQL server as the node. Skipped (with the reason) only when
// PostgreSQL is not installed; any other failure to start it fails.
func TestPostgresSmoke(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg, err := launchNodes("--postgres")
	if err != nil {
		_, required := harnessProgram()
		if errors.Is(err, errPostgresMissing) || !required {
			t.Skipf("SKIPPED: no PostgreSQL server: %v", err)
		}
		t.Fatalf("redis-nodes --postgres: %v", err)
	}
	defer pg.close()
	if !strings.HasPrefix(pg.URLs[0], "postgresql://") {
		t.Fatalf("URL %s", pg.URLs[0])
	}
	a, b := newClient(t, pg.URLs), newClient(t, pg.URLs)
	resource := unique(t)
	first, err := a.Acquire(ctx, resource, 5*time.Second, WithWait(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryAcquire(ctx, resource, time.Second); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("TryAcquire of a held lock on PostgreSQL: %v", err)
	}
	waited := make(chan *Lock, 1)
	go func() {
		l, err := b.Acquire(ctx, resource, 5*time.Second, WithWait(10*time.Second))
		if err != nil {
			t.Error(err)
		}
		waited <- l
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Extend(ctx, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-waited
	if second == nil {
		t.FailNow()
	}
	if second.FencingToken() <= first.FencingToken() {
		t.Fatalf("token %d after %d", second.FencingToken(), first.FencingToken())
	}
	if err := a.FencedSet(ctx, "pg:"+resource, "v", first.Fence()); err != nil {
		t.Fatal(err)
	}
	if err := a.FencedSet(ctx, "pg:"+resource, "w", second.Fence()); err != nil {
		t.Fatal(err)
	}
	if err := a.FencedSet(ctx, "pg:"+resource, "x", first.Fence()); !errors.Is(err, ErrStaleToken) {
		t.Fatalf("a stale write on PostgreSQL: %v", err)
	}
	_ = second.Release(ctx)
}
