package fencelock

/*
#include "shim.h"
*/
import "C"

import (
	"context"
	"fmt"
)

// FencedSet writes value to the Redis key key only if fence is newer than
// the last write's: a larger token, or the same token from the same grant
// (pass lock.Fence(), so one holder may write again and a second holder of
// an equal token is refused). Fence{Token: t} is a bare token, which writes
// only where every stored token is older. A newer holder's write gives
// ErrStaleToken: stop. key must not have the form of a lock key
// (ErrInvalidArgument); neither key nor value may hold a NUL byte.
func (c *Client) FencedSet(ctx context.Context, key, value string, fence Fence) error {
	if err := checkName("fenced key", key); err != nil {
		return err
	}
	if err := checkString(KindInvalidArgument, "the fenced value", value); err != nil {
		return err
	}
	if fence.Holder > limits.MaxHolderID {
		return newError(KindInvalidArgument, "holder id %d is above %d", fence.Holder, limits.MaxHolderID)
	}
	ckey, cvalue := cString(key), cString(value)
	defer freeCString(ckey)
	defer freeCString(cvalue)
	result, ctxErr, err := run[doneResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return c.use(func(client *C.fencelock_client) *Error {
			return started(C.go_fenced_set(client, ckey, cvalue, C.uint64_t(fence.Token), C.uint64_t(fence.Holder), handle, op, cerr), *cerr)
		})
	})
	if err != nil {
		return err
	}
	if ctxErr != nil {
		return contextError(fmt.Sprintf("fenced write of %q", key), ctxErr)
	}
	return orNil(result.err)
}

// FencedValue is a value written by FencedSet and the token that wrote it.
type FencedValue struct {
	Value string
	Token uint64
}

// FencedGet reads a value written by FencedSet and the token that wrote it;
// false when the key does not exist. It takes one round trip (bounded by
// the per-node timeout); a cancelled or expired ctx ends it at once (the
// error then wraps ctx.Err()).
func (c *Client) FencedGet(ctx context.Context, key string) (FencedValue, bool, error) {
	if err := checkName("fenced key", key); err != nil {
		return FencedValue{}, false, err
	}
	ckey := cString(key)
	defer freeCString(ckey)
	result, ctxErr, err := run[fencedValueResult](ctx, func(handle C.uintptr_t, op **C.fencelock_operation, cerr **C.fencelock_error) *Error {
		return c.use(func(client *C.fencelock_client) *Error {
			return started(C.go_fenced_get(client, ckey, handle, op, cerr), *cerr)
		})
	})
	if err != nil {
		return FencedValue{}, false, err
	}
	if ctxErr != nil {
		return FencedValue{}, false, contextError(fmt.Sprintf("fenced read of %q", key), ctxErr)
	}
	if result.err != nil {
		return FencedValue{}, false, result.err
	}
	return result.value, result.found, nil
}
