// C half of the Go front: the trampolines libfencelock calls (each passes
// its user_data, a runtime/cgo.Handle held as an integer, to an exported Go
// function of callbacks.go) and the starters that pair each *_async call
// with its trampoline, so Go code never builds a C function pointer.
#include "shim.h"

#include "_cgo_export.h"

static void go_acquired(void *user_data, fencelock_status status, fencelock_lock *lock, fencelock_error *error) {
  fencelockGoAcquired((uintptr_t)user_data, status, lock, error);
}
static void go_done(void *user_data, fencelock_status status, fencelock_error *error) {
  fencelockGoDone((uintptr_t)user_data, status, error);
}
static void go_leader(void *user_data, fencelock_status status, const fencelock_leader *leader, fencelock_error *error) {
  fencelockGoLeader((uintptr_t)user_data, status, (fencelock_leader *)leader, error);
}
static void go_inspected(void *user_data, fencelock_status status, fencelock_inspection *inspection,
    fencelock_error *error) {
  fencelockGoInspected((uintptr_t)user_data, status, inspection, error);
}
static void go_holders(void *user_data, fencelock_status status, size_t holders, fencelock_error *error) {
  fencelockGoHolders((uintptr_t)user_data, status, holders, error);
}
static void go_fenced_value(void *user_data, fencelock_status status, char *value, uint64_t token,
    fencelock_error *error) {
  fencelockGoFencedValue((uintptr_t)user_data, status, value, token, error);
}
static void go_client(void *user_data, fencelock_status status, fencelock_client *client, fencelock_error *error) {
  fencelockGoClient((uintptr_t)user_data, status, client, error);
}
static void go_lost(void *user_data, fencelock_loss_reason reason) {
  fencelockGoLost((uintptr_t)user_data, reason);
}
static void go_log(const fencelock_log_record *record, void *user_data) {
  (void)user_data;
  fencelockGoLog((fencelock_log_record *)record);
}

fencelock_status go_acquire(const fencelock_client *client, const char *resource,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_acquire_with_async(client, resource, options, go_acquired, (void *)handle, op, error);
}
fencelock_status go_semaphore_acquire(const fencelock_client *client, const char *name, uint32_t permits,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_semaphore_acquire_with_async(client, name, permits, options, go_acquired, (void *)handle, op, error);
}
fencelock_status go_rw_read(const fencelock_client *client, const char *name,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_rw_read_with_async(client, name, options, go_acquired, (void *)handle, op, error);
}
fencelock_status go_rw_write(const fencelock_client *client, const char *name,
    const fencelock_lock_options *options, uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_rw_write_with_async(client, name, options, go_acquired, (void *)handle, op, error);
}
fencelock_status go_campaign(const fencelock_client *client, const char *name, uint64_t ttl_ms,
    uint64_t wait_ms, const uint8_t *value, size_t value_len, uintptr_t handle, fencelock_operation **op,
    fencelock_error **error) {
  return fencelock_campaign_async(client, name, ttl_ms, wait_ms, value, value_len, go_acquired, (void *)handle, op, error);
}
fencelock_status go_release(const fencelock_lock *lock, uintptr_t handle, fencelock_operation **op,
    fencelock_error **error) {
  return fencelock_lock_release_async(lock, go_done, (void *)handle, op, error);
}
fencelock_status go_extend(const fencelock_lock *lock, uint64_t ttl_ms, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error) {
  return fencelock_lock_extend_async(lock, ttl_ms, go_done, (void *)handle, op, error);
}
fencelock_status go_fenced_set(const fencelock_client *client, const char *key, const char *value,
    uint64_t token, uint64_t holder, uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  fencelock_fence fence = {token, holder};
  return fencelock_fenced_set_async(client, key, value, fence, go_done, (void *)handle, op, error);
}
fencelock_status go_observation_next(const fencelock_observation *observation, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error) {
  return fencelock_observation_next_async(observation, go_leader, (void *)handle, op, error);
}
fencelock_status go_inspect(const fencelock_client *client, const char *resource, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error) {
  return fencelock_inspect_async(client, resource, go_inspected, (void *)handle, op, error);
}
fencelock_status go_semaphore_holders(const fencelock_client *client, const char *name, uint32_t permits,
    uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_semaphore_holders_async(client, name, permits, go_holders, (void *)handle, op, error);
}
fencelock_status go_fenced_get(const fencelock_client *client, const char *key, uintptr_t handle,
    fencelock_operation **op, fencelock_error **error) {
  return fencelock_fenced_get_async(client, key, go_fenced_value, (void *)handle, op, error);
}
fencelock_status go_client_new(const char *const *urls, size_t n_urls, const fencelock_options *options,
    uintptr_t handle, fencelock_operation **op, fencelock_error **error) {
  return fencelock_client_new_async(urls, n_urls, options, go_client, (void *)handle, op, error);
}
fencelock_status go_on_lost(const fencelock_lock *lock, uintptr_t handle, fencelock_error **error) {
  return fencelock_lock_on_lost(lock, go_lost, (void *)handle, error);
}
fencelock_status go_log_forward(int32_t level, fencelock_error **error) {
  return fencelock_log_forward(go_log, NULL, level, error);
}
// Releases a lock nobody will use (an acquire that won just as its context
// ended) in the background, and frees it: the release keeps what it needs.
void go_abandon(fencelock_lock *lock) {
  fencelock_lock_release_async(lock, go_done, NULL, NULL, NULL);
  fencelock_lock_free(lock);
}
