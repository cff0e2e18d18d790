package fencelock

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// One Redis node shared by the tests that need no faults of their own.
var shared struct {
	once  sync.Once
	nodes *nodes
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.nodes != nil {
		shared.nodes.close()
	}
	os.Exit(code)
}

// oneNode is the shared single node (started on first use).
func oneNode(t testing.TB) *nodes {
	t.Helper()
	shared.once.Do(func() { shared.nodes, shared.err = launchNodes("--nodes", "1") })
	if shared.err != nil {
		if _, required := harnessProgram(); !required {
			t.Skipf("no Redis harness: %v (run scripts/test-go.sh)", shared.err)
		}
		t.Fatalf("redis-nodes --nodes 1: %v", shared.err)
	}
	return shared.nodes
}

// newClient connects to urls and closes the client when the test ends. Its
// per-node timeout is a generous 2 s (a test's opts may override it): on a
// loaded 2-core machine under the race detector a request can take longer
// than the default 100 ms.
func newClient(t testing.TB, urls []string, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(urls, append([]Option{WithNodeTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		t.Fatalf("NewClient(%v): %v", urls, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// unique is a resource name of this test no other run shares.
func unique(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.NewReplacer("/", ":", " ", "_").Replace(t.Name()) + ":" + hex.EncodeToString(b[:])
}
