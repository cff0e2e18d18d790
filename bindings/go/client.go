package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"crypto/tls"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

// Client talks to one Redis node (single-node locks), to N independent
// Redis masters (Redlock: a majority decides), or to one PostgreSQL server
// (a postgresql:// URL). It is safe for concurrent use by many goroutines.
// Close it when done; locks taken through it stay valid after Close and must
// still be released.
type Client struct {
	mu      sync.RWMutex // read: a call uses ptr; write: Close frees it
	ptr     *C.fencelock_client
	cleanup runtime.Cleanup
}

// Option configures a Client (NewClient).
type Option func(*clientConfig) *Error

type clientConfig struct {
	steps []func(*C.fencelock_options) C.fencelock_status
}

func (c *clientConfig) add(step func(*C.fencelock_options) C.fencelock_status) *Error {
	c.steps = append(c.steps, step)
	return nil
}

// configMillis converts a client option's duration to milliseconds; 0 and
// negative durations are refused (the library refuses a zero timeout).
func configMillis(what string, d time.Duration) (C.uint64_t, *Error) {
	if d <= 0 {
		return 0, newError(KindConfig, "%s must be positive, got %v", what, d)
	}
	if d < time.Millisecond {
		return 0, newError(KindConfig, "%s %v is below a millisecond", what, d)
	}
	return C.uint64_t(d / time.Millisecond), nil
}

// WithKeyPrefix sets the prefix of every key (default "fencelock:"). Every
// client of one lock must use the same prefix.
func WithKeyPrefix(prefix string) Option {
	return func(c *clientConfig) *Error {
		if err := checkString(KindConfig, "the key prefix", prefix); err != nil {
			return err
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			s := cString(prefix)
			defer freeCString(s)
			return C.fencelock_options_set_key_prefix(o, s)
		})
	}
}

// WithNodeTimeout sets the hard limit on each request to one node (default 100 ms).
func WithNodeTimeout(d time.Duration) Option {
	return func(c *clientConfig) *Error {
		ms, err := configMillis("the node timeout", d)
		if err != nil {
			return err
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_node_timeout_ms(o, ms)
		})
	}
}

// WithConnectTimeout sets the limit on opening a connection to one node (default 1 s).
func WithConnectTimeout(d time.Duration) Option {
	return func(c *clientConfig) *Error {
		ms, err := configMillis("the connect timeout", d)
		if err != nil {
			return err
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_connect_timeout_ms(o, ms)
		})
	}
}

// WithCredentials sets the ACL user and password used on every node ("" for
// none); they override credentials in the URLs and never appear in logs or
// errors.
func WithCredentials(username, password string) Option {
	return func(c *clientConfig) *Error {
		if err := checkString(KindConfig, "the username", username); err != nil {
			return err
		}
		if err := checkString(KindConfig, "the password", password); err != nil {
			return err
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			var user, pass *C.char
			if username != "" {
				user = cString(username)
				defer freeCString(user)
			}
			if password != "" {
				pass = cString(password)
				defer freeCString(pass)
			}
			return C.fencelock_options_set_credentials(o, user, pass)
		})
	}
}

// WithTLSCA trusts this PEM-encoded CA bundle (instead of the built-in
// Mozilla roots) for rediss:// nodes.
func WithTLSCA(pem []byte) Option {
	return func(c *clientConfig) *Error {
		if len(pem) == 0 {
			return newError(KindConfig, "the TLS CA bundle is empty")
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			p := C.CBytes(pem)
			defer C.free(p)
			return C.fencelock_options_set_tls_ca_pem(o, (*C.uint8_t)(p), C.size_t(len(pem)))
		})
	}
}

// WithTLSClientCert presents this PEM certificate chain and private key to
// rediss:// nodes that require client certificates.
func WithTLSClientCert(certPEM, keyPEM []byte) Option {
	return func(c *clientConfig) *Error {
		if len(certPEM) == 0 || len(keyPEM) == 0 {
			return newError(KindConfig, "the TLS client certificate and key must both be given")
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			cert, key := C.CBytes(certPEM), C.CBytes(keyPEM)
			defer C.free(cert)
			defer C.free(key)
			return C.fencelock_options_set_tls_client_cert_pem(o,
				(*C.uint8_t)(cert), C.size_t(len(certPEM)), (*C.uint8_t)(key), C.size_t(len(keyPEM)))
		})
	}
}

// WithTLSMinVersion sets the oldest TLS version spoken with rediss:// nodes:
// tls.VersionTLS12 (the default) or tls.VersionTLS13.
func WithTLSMinVersion(version uint16) Option {
	return func(c *clientConfig) *Error {
		var v C.int32_t
		switch version {
		case tls.VersionTLS12:
			v = C.FENCELOCK_TLS_VERSION_1_2
		case tls.VersionTLS13:
			v = C.FENCELOCK_TLS_VERSION_1_3
		default:
			return newError(KindConfig, "TLS version %#04x is not supported: use tls.VersionTLS12 or tls.VersionTLS13", version)
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_tls_min_version(o, v)
		})
	}
}

// WithDrift sets the clock-drift factor subtracted from a lock's validity
// (default 0.01; 0 to Limits.MaxDriftFactor).
func WithDrift(factor float64) Option {
	return func(c *clientConfig) *Error {
		if math.IsNaN(factor) || factor < 0 || factor > limits.MaxDriftFactor {
			return newError(KindConfig, "drift factor %v is out of range: give 0 to %v", factor, limits.MaxDriftFactor)
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_drift_factor(o, C.double(factor))
		})
	}
}

// WithRetry sets the backoff between attempts while waiting: full jitter,
// starting from base and doubling up to max.
func WithRetry(base, max time.Duration) Option {
	return func(c *clientConfig) *Error {
		b, err := configMillis("the retry base", base)
		if err != nil {
			return err
		}
		m, err := configMillis("the retry maximum", max)
		if err != nil {
			return err
		}
		if m < b {
			return newError(KindConfig, "the retry maximum %v is below its base %v", max, base)
		}
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_retry_ms(o, b, m)
		})
	}
}

// WithAutoRenew turns automatic renewal of acquired locks on (the default)
// or off; a lock can override it with LockAutoRenew.
func WithAutoRenew(on bool) Option {
	return func(c *clientConfig) *Error {
		return c.add(func(o *C.fencelock_options) C.fencelock_status {
			return C.fencelock_options_set_auto_renew(o, C.bool(on))
		})
	}
}

// NewClient connects to nodes: redis://[user:password@]host:port[/db],
// rediss:// for TLS, redis+cluster:// for one Redis Cluster, or one
// postgresql:// URL. A node that is merely down does not fail it (locks need
// only a majority); a bad URL or option is KindConfig, refused credentials
// KindAuth, a failed handshake KindTLS. It blocks while connecting, up to
// the connect timeout; NewClientContext can be cancelled.
func NewClient(nodes []string, opts ...Option) (*Client, error) {
	return NewClientContext(context.Background(), nodes, opts...)
}

// NewClientContext is NewClient under ctx: a cancelled or expired ctx ends
// the connecting at once (the error then wraps ctx.Err(), and the client
// being made is dropped). ctx bounds only the connecting, not the client.
func NewClientContext(ctx context.Context, nodes []string, opts ...Option) (*Client, error) {
	if len(nodes) == 0 {
		return nil, newError(KindConfig, "no nodes: give at least one redis:// or postgresql:// URL")
	}
	var config clientConfig
	for _, opt := range opts {
		if opt == nil {
			continue
		}
		if err := opt(&config); err != nil {
			return nil, err
		}
	}
	urls := make([]*C.char, len(nodes))
	for i, node := range nodes {
		if err := checkString(KindConfig, "node URL "+node, node); err != nil {
			for _, u := range urls[:i] {
				freeCString(u)
			}
			return nil, err
		}
		urls[i] = cString(node)
	}
	// The array of pointers lives in C memory: C must not be handed Go
	// memory that holds pointers.
	array := (**C.char)(C.malloc(C.size_t(len(urls)) * C.size_t(unsafe.Sizeof(urls[0]))))
	defer C.free(unsafe.Pointer(array))
	copy(unsafe.Slice(array, len(urls)), urls)
	defer func() {
		for _, u := range urls {
			freeCString(u)
		}
	}()

	var options *C.fencelock_options
	if C.fencelock_options_new(&options) != C.FENCELOCK_STATUS_OK {
		return nil, newError(KindInternal, "could not create options")
	}
	defer C.fencelock_options_free(options)
	for _, step := range config.steps {
		if status := step(options); status != C.FENCELOCK_STATUS_OK {
			return nil, takeError(status, nil)
		}
	}
	// The call copies the URLs and options: they are freed when this returns.
	result, ctxErr, err := run[clientResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return started(C.go_client_new(array, C.size_t(len(urls)), options, handle, op, cerr), *cerr)
	})
	if err != nil {
		return nil, err
	}
	if ctxErr != nil {
		if result.client != nil { // connected just as ctx ended: nobody will use it
			C.fencelock_client_free(result.client)
		}
		// Not the URLs: they may carry a password.
		return nil, contextError(fmt.Sprintf("connecting to %d node(s)", len(nodes)), ctxErr)
	}
	if result.err != nil {
		return nil, result.err
	}
	ptr := result.client
	c := &Client{ptr: ptr}
	// A safety net only: Close is the API.
	c.cleanup = runtime.AddCleanup(c, func(p *C.fencelock_client) { C.fencelock_client_free(p) }, ptr)
	return c, nil
}

// Close closes the client and frees it; it does no network I/O. Locks taken
// through it stay held and renewed until released. Calling Close again does
// nothing; any other use after Close returns ErrClosed.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ptr == nil {
		return nil
	}
	c.cleanup.Stop()
	C.fencelock_client_free(c.ptr)
	c.ptr = nil
	return nil
}

// use runs f with the native client, or returns ErrClosed's kind after Close.
func (c *Client) use(f func(*C.fencelock_client) *Error) *Error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.ptr == nil {
		return newError(KindClosed, "the client is closed")
	}
	return f(c.ptr)
}

// Settle waits, up to timeout, until no client of the process has clean-up
// running in the background (the undo of an abandoned acquire, the rest of
// a release on its way to slow nodes). Call it before the process exits:
// background work dies with the process, and a key it would have removed
// blocks its resource until the ttl. Returns an error of KindTimeout when
// some is still running.
func Settle(timeout time.Duration) error {
	if timeout < 0 {
		timeout = 0
	}
	if status := C.fencelock_settle(C.uint64_t(timeout / time.Millisecond)); status != C.FENCELOCK_STATUS_OK {
		return takeError(status, nil)
	}
	return nil
}
