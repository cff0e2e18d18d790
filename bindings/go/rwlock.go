package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"time"
)

// RWLock is a read-write lock: any number of readers at once, or one
// writer. Each grant is a *Lock with its own lease, fencing token and Lost
// channel; a writer's token is above every earlier grant's, so storage that
// keeps the largest token refuses a stale writer. A waiting writer is not
// overtaken by readers that ask after it.
type RWLock struct {
	client *Client
	name   string
}

// RWLock returns the read-write lock name. It does no I/O. Its keys never
// collide with a lock's, a semaphore's or an election's of the same name.
func (c *Client) RWLock(name string) *RWLock {
	return &RWLock{client: c, name: name}
}

// Name is the read-write lock's name.
func (rw *RWLock) Name() string { return rw.name }

func readLock(client *C.fencelock_client, name *C.char, options *C.fencelock_lock_options,
	handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) C.fencelock_status {
	return C.go_rw_read(client, name, options, handle, op, cerr)
}

func writeLock(client *C.fencelock_client, name *C.char, options *C.fencelock_lock_options,
	handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) C.fencelock_status {
	return C.go_rw_write(client, name, options, handle, op, cerr)
}

// AcquireRead takes the lock for reading, beside other readers, waiting
// while a writer holds it or waits ahead: until ctx ends or for the
// WithWait bound (ErrTimeout). Errors as Client.Acquire.
func (rw *RWLock) AcquireRead(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return rw.client.acquire(ctx, "read-write lock", rw.name, ttl, opts, false, readLock)
}

// AcquireWrite takes the lock for writing, alone, waiting while readers or
// another writer hold it: until ctx ends or for the WithWait bound.
func (rw *RWLock) AcquireWrite(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return rw.client.acquire(ctx, "read-write lock", rw.name, ttl, opts, false, writeLock)
}

// TryRead makes one attempt to read; ErrNotAcquired while a writer holds
// the lock or waits for it.
func (rw *RWLock) TryRead(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return rw.client.acquire(ctx, "read-write lock", rw.name, ttl, opts, true, readLock)
}

// TryWrite makes one attempt to write; ErrNotAcquired while anyone holds
// the lock.
func (rw *RWLock) TryWrite(ctx context.Context, ttl time.Duration, opts ...LockOption) (*Lock, error) {
	return rw.client.acquire(ctx, "read-write lock", rw.name, ttl, opts, true, writeLock)
}
