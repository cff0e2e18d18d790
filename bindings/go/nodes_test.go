package fencelock

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// nodes is the shared Redis harness (tests/harness, program redis-nodes) as
// a child process, as the C, Python and .NET tests use it: the first stdout
// line lists the node URLs; then one command per stdin line (kill I,
// restart I, pause I, resume I, call I ARGS…, sql … with --postgres),
// answered "ok …" or "error: …". Closing stdin stops every node.
type nodes struct {
	mu    sync.Mutex
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	URLs  []string
}

// redis-nodes --postgres exits with this when PostgreSQL is not installed:
// the one reason a PostgreSQL test skips.
const postgresMissing = 77

var errPostgresMissing = errors.New("PostgreSQL is not installed (redis-nodes --postgres exited 77)")

// harnessProgram is $FENCELOCK_REDIS_NODES, else the repository's debug
// build; "" when neither exists.
func harnessProgram() (string, bool) {
	if program := os.Getenv("FENCELOCK_REDIS_NODES"); program != "" {
		return program, true
	}
	program, _ := filepath.Abs("../../target/debug/redis-nodes")
	if _, err := os.Stat(program); err != nil {
		return "", false
	}
	return program, false
}

// startNodes starts redis-nodes with args (such as "--nodes", "3"). Without
// the program (outside the repository) the test is skipped; with
// $FENCELOCK_REDIS_NODES set, as scripts/test-go.sh sets it, a failure is a
// failure.
func startNodes(t testing.TB, args ...string) *nodes {
	t.Helper()
	n, err := launchNodes(args...)
	if err != nil {
		if _, required := harnessProgram(); !required {
			t.Skipf("no Redis harness: %v (build it with cargo build -p fencelock-harness --bin redis-nodes, or run scripts/test-go.sh)", err)
		}
		t.Fatalf("redis-nodes %s: %v", strings.Join(args, " "), err)
	}
	t.Cleanup(n.close)
	return n
}

func launchNodes(args ...string) (*nodes, error) {
	program, _ := harnessProgram()
	if program == "" {
		return nil, fmt.Errorf("../../target/debug/redis-nodes is missing and FENCELOCK_REDIS_NODES is not set")
	}
	cmd := exec.Command(program, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	out := bufio.NewReader(stdout)
	first, err := out.ReadString('\n')
	var listed struct {
		Nodes []string `json:"nodes"`
	}
	if err != nil || json.Unmarshal([]byte(first), &listed) != nil || len(listed.Nodes) == 0 {
		_ = stdin.Close()
		_ = cmd.Wait()
		said := fmt.Errorf("it printed %q (%v): %s", strings.TrimSpace(first), cmd.ProcessState, strings.TrimSpace(stderr.String()))
		if cmd.ProcessState != nil && cmd.ProcessState.ExitCode() == postgresMissing {
			return nil, fmt.Errorf("%w: %w", errPostgresMissing, said)
		}
		return nil, said
	}
	return &nodes{cmd: cmd, stdin: stdin, out: out, URLs: listed.Nodes}, nil
}

// run sends one harness command and returns what follows "ok".
func (n *nodes) run(t testing.TB, command string) string {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := io.WriteString(n.stdin, command+"\n"); err != nil {
		t.Fatalf("harness: %s: %v", command, err)
	}
	line, err := n.out.ReadString('\n')
	line = strings.TrimRight(line, "\n")
	if err != nil || !strings.HasPrefix(line, "ok") {
		t.Fatalf("harness: %s -> %q (%v)", command, line, err)
	}
	return strings.TrimPrefix(strings.TrimPrefix(line, "ok"), " ")
}

// call runs one Redis command on node i.
func (n *nodes) call(t testing.TB, i int, args ...string) string {
	t.Helper()
	return n.run(t, fmt.Sprintf("call %d %s", i, strings.Join(args, " ")))
}

func (n *nodes) close() {
	_ = n.stdin.Close()
	_ = n.cmd.Wait()
}
