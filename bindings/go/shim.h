// The C half of the Go front (shim.c): starters that pair each fencelock
// *_async call with the trampoline that hands its outcome to Go. `handle`
// is a runtime/cgo.Handle: C never holds a Go pointer.
#ifndef FENCELOCK_GO_SHIM_H
#define FENCELOCK_GO_SHIM_H

#include <stdint.h>
#include <stdlib.h>

#include "fencelock.h"

fencelock_status go_acquire(const fencelock_client *client, const char *resource,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_semaphore_acquire(const fencelock_client *client, const char *name, uint32_t permits,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_rw_read(const fencelock_client *client, const char *name,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_rw_write(const fencelock_client *client, const char *name,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_campaign(const fencelock_client *client, const char *name, uint64_t ttl_ms,
    uint64_t wait_ms, const uint8_t *value, size_t value_len, uintptr_t handle, fencelock_operation **op,
    fencelock_error **error);
fencelock_status go_release(const fencelock_lock *lock, uintptr_t handle, fencelock_operation **op,
    fencelock_error **error);
fencelock_status go_extend(const fencelock_lock *lock, uint64_t ttl_ms, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error);
fencelock_status go_fenced_set(const fencelock_client *client, const char *key, const char *value,
    uint64_t token, uint64_t holder, uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_observation_next(const fencelock_observation *observation, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error);
fencelock_status go_inspect(const fencelock_client *client, const char *resource, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error);
fencelock_status go_semaphore_holders(const fencelock_client *client, const char *name, uint32_t permits,
    uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_fenced_get(const fencelock_client *client, const char *key, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error);
fencelock_status go_client_new(const char *const *urls, size_t n_urls, const fencelock_options *options,
    uintptr_t handle, fencelock_operation **op, fencelock_error **error);
fencelock_status go_on_lost(const fencelock_lock *lock, uintptr_t handle, fencelock_error **error);
fencelock_status go_log_forward(int32_t level, fencelock_error **error);
// Releases a lock nobody will use (an acquire that won just as its context
// ended) in the background, and frees it.
void go_abandon(fencelock_lock *lock);

#endif
