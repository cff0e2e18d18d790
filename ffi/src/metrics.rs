//! `fencelock_metrics`: what a client has counted (design.md §8), as a
//! snapshot struct the caller owns and fencelock fills in.
//!
//! The struct is versioned by size, as Win32's `cbSize` structs are: the
//! caller sets `size` to `sizeof(fencelock_metrics)` of the header it was
//! compiled with, and fencelock writes no byte past it. Later versions only
//! append fields, so a program built against this header keeps working
//! with a later library (which fills the fields this header knows), and a
//! program built against a later header learns from `size` (set to what was
//! written) which fields an older library left alone.

use std::mem::{MaybeUninit, offset_of, size_of};
use std::ptr::{self, addr_of, addr_of_mut};
use std::sync::LazyLock;
use std::time::Duration;

use fencelock::{ErrorKind, LossReason, Metrics};

use crate::args;
use crate::boundary::{Failure, boundary};
use crate::client::fencelock_client;
use crate::error::fencelock_error;
use crate::loss_reason::fencelock_loss_reason;
use crate::status::fencelock_status;

/// How many acquire-latency buckets a snapshot has
/// ([`fencelock_latency_buckets`] gives their bounds).
pub const FENCELOCK_LATENCY_BUCKET_COUNT: usize = 14;
/// Room for failure counts in `fencelock_metrics::failed`: one per error
/// kind, with room for kinds a later version adds.
pub const FENCELOCK_METRICS_MAX_KINDS: usize = 32;
/// Room for loss counts in `fencelock_metrics::lost`: one per loss reason,
/// with room for reasons a later version adds.
pub const FENCELOCK_METRICS_MAX_REASONS: usize = 16;
/// `latency_p50_ns` / `latency_p99_ns` when there is no estimate: no
/// acquire timed yet, or the quantile lies past the last bucket (over 10 s).
pub const FENCELOCK_LATENCY_NONE: u64 = u64::MAX;

// The struct's layout is fixed by the header; the core must fit it.
const _: () = assert!(fencelock::LATENCY_BUCKETS.len() == FENCELOCK_LATENCY_BUCKET_COUNT);
const _: () = assert!(ErrorKind::ALL.len() <= FENCELOCK_METRICS_MAX_KINDS);
const _: () = assert!(LossReason::ALL.len() <= FENCELOCK_METRICS_MAX_REASONS);

/// The acquisitions that failed with one error kind.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fencelock_failure_count {
    /// The error kind, as the status an acquire returns for it.
    pub kind: fencelock_status,
    /// How many acquisitions failed with it.
    pub count: u64,
}

/// The held locks lost for one reason.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fencelock_loss_count {
    /// The reason.
    pub reason: fencelock_loss_reason,
    /// How many held locks were lost for it.
    pub count: u64,
}

/// A snapshot of what one client has counted since it was made (design.md
/// §8), filled in by [`fencelock_client_metrics`]. Acquisitions count every
/// acquire of the client: locks, semaphore permits, read and write grants
/// and campaigns, blocking or `_async`.
///
/// Owned by the caller (on the stack is fine); fencelock keeps no pointer
/// to it. Plain data: copy it, read it from any thread.
///
/// Set `size` before the call (`fencelock_metrics m = {.size = sizeof m};`,
/// which also zeroes the rest): fencelock writes at most `size` bytes and
/// sets `size` to how many it wrote. Fields are only ever appended, so
/// every field that ends within the returned `size` is filled in.
///
/// Durations are nanoseconds.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fencelock_metrics {
    /// In: `sizeof(fencelock_metrics)` as the caller knows it. Out: the
    /// bytes fencelock wrote (the smaller of that and its own size).
    pub size: usize,
    /// Acquisitions that returned a lock, a permit or a grant.
    pub acquired: u64,
    /// Releases that succeeded (a release of a lock no longer held is none).
    pub released: u64,
    /// Automatic renewals that succeeded.
    pub renewals: u64,
    /// Automatic renewals that failed (retried until the lock is lost).
    pub renewal_failures: u64,
    /// Gauge: locks held now (not released, lost or freed).
    pub held: u64,
    /// Gauge: acquire calls waiting in a lock's queue now.
    pub waiting: u64,
    /// How many entries of `failed` are filled in: one per error kind of
    /// the library, zeros included (at most `FENCELOCK_METRICS_MAX_KINDS`).
    pub n_failed: usize,
    /// Failed acquisitions by error kind, in the order of the kinds'
    /// numbers; [`fencelock_metrics_failed`] looks one up. A refused
    /// `fencelock_try_acquire` is `FENCELOCK_STATUS_NOT_ACQUIRED`; a
    /// cancelled `_async` acquire is `FENCELOCK_STATUS_CANCELLED`. Entries
    /// from `n_failed` on are `{FENCELOCK_STATUS_OK, 0}`.
    pub failed: [fencelock_failure_count; FENCELOCK_METRICS_MAX_KINDS],
    /// How many entries of `lost` are filled in: one per loss reason, zeros
    /// included (at most `FENCELOCK_METRICS_MAX_REASONS`).
    pub n_lost: usize,
    /// Held locks lost, by reason; [`fencelock_metrics_lost`] looks one up.
    /// Entries from `n_lost` on are `{FENCELOCK_LOSS_OTHER, 0}`.
    pub lost: [fencelock_loss_count; FENCELOCK_METRICS_MAX_REASONS],
    /// Acquire calls timed (every acquisition and every failure).
    pub latency_count: u64,
    /// Their total duration, in nanoseconds.
    pub latency_sum_ns: u64,
    /// Cumulative: `latency_buckets[i]` acquire calls took at most
    /// [`fencelock_latency_buckets`]`()[i]` ns (as Prometheus counts); the
    /// other `latency_count - latency_buckets[FENCELOCK_LATENCY_BUCKET_COUNT - 1]`
    /// took longer than the last bound.
    pub latency_buckets: [u64; FENCELOCK_LATENCY_BUCKET_COUNT],
    /// Estimated median acquire latency in ns: the upper bound of the
    /// bucket it falls in, or `FENCELOCK_LATENCY_NONE`.
    pub latency_p50_ns: u64,
    /// Estimated 99th-percentile acquire latency in ns, as `latency_p50_ns`.
    pub latency_p99_ns: u64,
}

/// The size of the first version of the struct: what a caller must at least
/// pass in `size`. Appending fields does not change it.
const FIRST_VERSION_SIZE: usize = offset_of!(fencelock_metrics, latency_p99_ns) + size_of::<u64>();

/// The bucket bounds in nanoseconds, from the core's seconds.
static BUCKET_BOUNDS_NS: LazyLock<[u64; FENCELOCK_LATENCY_BUCKET_COUNT]> =
    LazyLock::new(|| fencelock::LATENCY_BUCKETS.map(|seconds| nanos(Duration::from_secs_f64(seconds))));

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX - 1)
}

/// The upper bounds of the acquire-latency buckets, in nanoseconds,
/// ascending: `FENCELOCK_LATENCY_BUCKET_COUNT` values (0.5 ms to 10 s, the
/// `latency_buckets_seconds` every front shares).
///
/// Ownership: a static array; never free or modify it. Never NULL. Never
/// blocks; thread-safe.
#[unsafe(no_mangle)]
pub extern "C" fn fencelock_latency_buckets() -> *const u64 {
    BUCKET_BOUNDS_NS.as_ptr()
}

/// Fills `*out` with what `client` has counted so far.
///
/// * `client`: borrowed for the call. A client's counters start at zero
///   and are its own: two clients in one process count separately.
/// * `out`: caller-owned, with `out->size` set to `sizeof(fencelock_metrics)`
///   (other fields need not be initialised; bytes past `size` are never
///   touched). Written only on success; then `out->size` is the number of
///   bytes written.
/// * `error`: NULL, or receives detail on failure.
///
/// Fails with `FENCELOCK_STATUS_NULL_ARGUMENT` when `client` or `out` is
/// NULL, and `FENCELOCK_STATUS_INVALID_ARGUMENT` when `out->size` is smaller
/// than the first version of the struct (an unset `size`).
///
/// Never blocks and does no I/O: it reads the client's counters, each on
/// its own, so a snapshot taken while locks come and go may mix moments
/// (`held` counted before an acquisition it includes, say). Thread-safe;
/// may be called from callbacks.
///
/// # Safety
/// `client` is NULL or live; `out` is NULL or points to `out->size`
/// writable bytes, aligned for `fencelock_metrics`; `error` is NULL or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_client_metrics(
    client: *const fencelock_client,
    out: *mut fencelock_metrics,
    error: *mut *mut fencelock_error,
) -> fencelock_status {
    // SAFETY: `error` per the contract; the body reads the rest under the same contract.
    unsafe {
        boundary(error, || {
            let client = args::object(client, "client")?;
            let out = args::out(out, "out")?;
            // SAFETY: non-NULL, and at least `size` bytes per the contract.
            let size = addr_of!((*out).size).read();
            if size < FIRST_VERSION_SIZE {
                return Err(Failure::invalid(format!(
                    "out->size is {size}; set it to sizeof(fencelock_metrics) ({}) before the call",
                    size_of::<fencelock_metrics>()
                )));
            }
            let written = size.min(size_of::<fencelock_metrics>());
            let snapshot = snapshot(&client.inner.metrics(), written);
            // SAFETY: `written` bytes of the snapshot are initialised (it was
            // zeroed), and the caller's struct holds at least that many.
            ptr::copy_nonoverlapping(snapshot.as_ptr().cast::<u8>(), out.cast::<u8>(), written);
            Ok(())
        })
    }
}

/// The C snapshot of `metrics`, with `size` set to `written`. Zeroed first,
/// so padding is zeros, never uninitialised bytes.
fn snapshot(metrics: &Metrics, written: usize) -> MaybeUninit<fencelock_metrics> {
    let mut out = MaybeUninit::<fencelock_metrics>::zeroed();
    let p = out.as_mut_ptr();
    let latency = &metrics.acquire_latency;
    let quantile = |q: f64| latency.quantile(q).map_or(FENCELOCK_LATENCY_NONE, nanos);
    // SAFETY: `p` points to a live, zeroed `fencelock_metrics`; every write
    // below is of a field (or an array element within bounds) through it,
    // and every value written is valid for its field's type.
    unsafe {
        addr_of_mut!((*p).size).write(written);
        addr_of_mut!((*p).acquired).write(metrics.acquired);
        addr_of_mut!((*p).released).write(metrics.released);
        addr_of_mut!((*p).renewals).write(metrics.renewals);
        addr_of_mut!((*p).renewal_failures).write(metrics.renewal_failures);
        addr_of_mut!((*p).held).write(metrics.held);
        addr_of_mut!((*p).waiting).write(metrics.waiting);
        let failed = addr_of_mut!((*p).failed).cast::<fencelock_failure_count>();
        let mut kinds: Vec<_> = metrics.failed.iter().take(FENCELOCK_METRICS_MAX_KINDS).collect();
        kinds.sort_by_key(|(kind, _)| kind.code());
        for (i, (kind, count)) in kinds.iter().enumerate() {
            let entry = failed.add(i);
            addr_of_mut!((*entry).kind).write(fencelock_status::from(*kind));
            addr_of_mut!((*entry).count).write(*count);
        }
        addr_of_mut!((*p).n_failed).write(kinds.len());
        let lost = addr_of_mut!((*p).lost).cast::<fencelock_loss_count>();
        let reasons = &metrics.lost[..metrics.lost.len().min(FENCELOCK_METRICS_MAX_REASONS)];
        for i in 0..FENCELOCK_METRICS_MAX_REASONS {
            // Unused entries: the catch-all reason with no count (a zeroed
            // entry would not be a valid loss reason).
            let (reason, count) = reasons
                .get(i)
                .map_or((fencelock_loss_reason::FENCELOCK_LOSS_OTHER, 0), |(r, n)| {
                    ((*r).into(), *n)
                });
            let entry = lost.add(i);
            addr_of_mut!((*entry).reason).write(reason);
            addr_of_mut!((*entry).count).write(count);
        }
        addr_of_mut!((*p).n_lost).write(reasons.len());
        addr_of_mut!((*p).latency_count).write(latency.count);
        addr_of_mut!((*p).latency_sum_ns).write(nanos(latency.sum));
        let buckets = addr_of_mut!((*p).latency_buckets).cast::<u64>();
        for (i, (_, below)) in latency
            .buckets
            .iter()
            .take(FENCELOCK_LATENCY_BUCKET_COUNT)
            .enumerate()
        {
            buckets.add(i).write(*below);
        }
        addr_of_mut!((*p).latency_p50_ns).write(quantile(0.5));
        addr_of_mut!((*p).latency_p99_ns).write(quantile(0.99));
    }
    out
}

/// Reads the count of entry `value` from the `n` (at most `capacity`)
/// entries of a table of `(int32 key, uint64 count)` at `table`, or 0.
///
/// # Safety
/// `table` points to `capacity` readable entries of type `E`, whose first
/// field is 4 bytes of key and whose `count` is at `count_offset`.
unsafe fn count_of<E>(table: *const E, n: usize, capacity: usize, count_offset: usize, key: i32) -> u64 {
    (0..n.min(capacity))
        .map(|i| {
            // SAFETY: within the table, per the contract. The key is read as
            // an integer, so any value the caller left there is safe.
            unsafe {
                let entry = table.add(i).cast::<u8>();
                (
                    entry.cast::<i32>().read(),
                    entry.add(count_offset).cast::<u64>().read(),
                )
            }
        })
        .find(|(k, _)| *k == key)
        .map_or(0, |(_, count)| count)
}

/// The acquisitions of `metrics` that failed with `kind` (a
/// `fencelock_status` value such as `FENCELOCK_STATUS_NOT_ACQUIRED`); 0 for
/// a status that is no error kind, and when `metrics` is NULL.
///
/// Takes an `int32_t` rather than the enum so any value is safe to pass.
/// Never blocks; thread-safe.
///
/// # Safety
/// `metrics` is NULL or was filled in by [`fencelock_client_metrics`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_metrics_failed(metrics: *const fencelock_metrics, kind: i32) -> u64 {
    if metrics.is_null() {
        return 0;
    }
    // SAFETY: a filled-in snapshot, per the contract (its `size` covers
    // the first version, which has the table).
    unsafe {
        count_of(
            addr_of!((*metrics).failed).cast::<fencelock_failure_count>(),
            addr_of!((*metrics).n_failed).read(),
            FENCELOCK_METRICS_MAX_KINDS,
            offset_of!(fencelock_failure_count, count),
            kind,
        )
    }
}

/// The held locks of `metrics` lost for `reason` (a `fencelock_loss_reason`
/// value such as `FENCELOCK_LOSS_DELETED`); 0 for an unknown reason, and
/// when `metrics` is NULL.
///
/// Takes an `int32_t` rather than the enum so any value is safe to pass.
/// Never blocks; thread-safe.
///
/// # Safety
/// `metrics` is NULL or was filled in by [`fencelock_client_metrics`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn fencelock_metrics_lost(metrics: *const fencelock_metrics, reason: i32) -> u64 {
    if metrics.is_null() {
        return 0;
    }
    // SAFETY: as in `fencelock_metrics_failed`.
    unsafe {
        count_of(
            addr_of!((*metrics).lost).cast::<fencelock_loss_count>(),
            addr_of!((*metrics).n_lost).read(),
            FENCELOCK_METRICS_MAX_REASONS,
            offset_of!(fencelock_loss_count, count),
            reason,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client's (zero) metrics with every field then set: the core's
    /// `Metrics` is non-exhaustive, so only a client makes one.
    fn sample() -> Metrics {
        let client = fencelock::block_on(
            fencelock::ClientBuilder::default()
                .nodes(["redis://127.0.0.1:1"])
                .build(),
        )
        .unwrap()
        .unwrap();
        let mut m = client.metrics();
        assert_eq!((m.acquired, m.acquire_latency.count), (0, 0));
        m.acquired = 3;
        m.failed.reverse(); // out of order: the snapshot sorts them
        for (kind, count) in &mut m.failed {
            *count = kind.code() as u64 * 10;
        }
        for (i, (_, count)) in m.lost.iter_mut().enumerate() {
            *count = i as u64 + 100;
        }
        (m.released, m.renewals, m.renewal_failures, m.held, m.waiting) = (4, 5, 6, 7, 8);
        let latency = &mut m.acquire_latency;
        (latency.count, latency.sum) = (2, Duration::from_millis(1500));
        for (bound, below) in &mut latency.buckets {
            *below =
                u64::from(*bound >= Duration::from_millis(1)) + u64::from(*bound >= Duration::from_secs(1));
        }
        m
    }

    #[test]
    fn the_layout_is_one_version_and_the_bounds_are_the_vectors() {
        assert_eq!(FIRST_VERSION_SIZE, size_of::<fencelock_metrics>());
        // SAFETY: a static array of FENCELOCK_LATENCY_BUCKET_COUNT values.
        let bounds = unsafe {
            std::slice::from_raw_parts(fencelock_latency_buckets(), FENCELOCK_LATENCY_BUCKET_COUNT)
        };
        let listed = crate::tests::vectors()["metrics"]["latency_buckets_seconds"].clone();
        let seconds: Vec<f64> = listed
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_f64().unwrap())
            .collect();
        let from_vectors: Vec<u64> = seconds.iter().map(|s| (s * 1e9).round() as u64).collect();
        assert_eq!(bounds, from_vectors.as_slice());
        assert_eq!(bounds[0], 500_000);
        assert_eq!(bounds[FENCELOCK_LATENCY_BUCKET_COUNT - 1], 10_000_000_000);
    }

    #[test]
    fn a_snapshot_carries_every_count_and_looks_kinds_up_by_status() {
        let metrics = sample();
        let full = snapshot(&metrics, size_of::<fencelock_metrics>());
        // SAFETY: zeroed, then every field written with valid values.
        let m = unsafe { full.assume_init_ref() };
        assert_eq!(m.size, size_of::<fencelock_metrics>());
        assert_eq!(
            (m.acquired, m.released, m.renewals, m.renewal_failures),
            (3, 4, 5, 6)
        );
        assert_eq!((m.held, m.waiting), (7, 8));
        assert_eq!(m.n_failed, ErrorKind::ALL.len());
        let codes: Vec<i32> = m.failed[..m.n_failed].iter().map(|e| e.kind as i32).collect();
        let mut sorted = codes.clone();
        sorted.sort_unstable();
        assert_eq!(codes, sorted, "in the order of the kinds' numbers");
        for kind in ErrorKind::ALL {
            // SAFETY: a filled-in snapshot.
            let count = unsafe { fencelock_metrics_failed(m, kind.code()) };
            assert_eq!(count, kind.code() as u64 * 10, "{kind}");
        }
        // SAFETY: a filled-in snapshot, and NULL.
        unsafe {
            assert_eq!(fencelock_metrics_failed(m, 0), 0, "OK is no error kind");
            assert_eq!(
                fencelock_metrics_failed(m, 100),
                0,
                "NULL_ARGUMENT is no error kind"
            );
            assert_eq!(fencelock_metrics_failed(ptr::null(), 1), 0);
            assert_eq!(m.n_lost, LossReason::ALL.len());
            for (i, reason) in LossReason::ALL.iter().enumerate() {
                let value = fencelock_loss_reason::from(*reason) as i32;
                assert_eq!(fencelock_metrics_lost(m, value), i as u64 + 100, "{reason:?}");
            }
            assert_eq!(fencelock_metrics_lost(m, 99), 0, "unused entries count nothing");
            assert_eq!(fencelock_metrics_lost(ptr::null(), 1), 0);
        }
        assert_eq!((m.latency_count, m.latency_sum_ns), (2, 1_500_000_000));
        assert_eq!(m.latency_buckets[0], 0, "0.5 ms");
        assert_eq!(m.latency_buckets[1], 1, "1 ms");
        assert_eq!(m.latency_buckets[10], 2, "1 s");
        assert_eq!(m.latency_p50_ns, 1_000_000);
        assert_eq!(m.latency_p99_ns, 1_000_000_000);

        let mut empty = metrics;
        empty.acquire_latency.count = 0;
        let written = FIRST_VERSION_SIZE - 8;
        let empty = snapshot(&empty, written);
        // SAFETY: as above.
        let empty = unsafe { empty.assume_init_ref() };
        assert_eq!(
            (empty.latency_p50_ns, empty.latency_p99_ns),
            (FENCELOCK_LATENCY_NONE, FENCELOCK_LATENCY_NONE)
        );
        assert_eq!(empty.size, written);
    }

    #[test]
    fn the_size_field_bounds_what_is_written() {
        use fencelock_status::*;
        let urls = [c"redis://127.0.0.1:1".as_ptr()];
        let mut client = ptr::null_mut();
        // SAFETY: valid arguments throughout; `bigger` is larger than the
        // struct and its tail stays ours.
        unsafe {
            let status = crate::client::fencelock_client_new(
                urls.as_ptr(),
                1,
                ptr::null(),
                &mut client,
                ptr::null_mut(),
            );
            assert_eq!(status, FENCELOCK_STATUS_OK);
            let mut m = MaybeUninit::<fencelock_metrics>::zeroed();
            let mut error = ptr::null_mut();
            assert_eq!(
                fencelock_client_metrics(client, m.as_mut_ptr(), &mut error),
                FENCELOCK_STATUS_INVALID_ARGUMENT
            );
            let message = std::ffi::CStr::from_ptr(crate::error::fencelock_error_message(error));
            assert!(
                message.to_str().unwrap().contains("sizeof(fencelock_metrics)"),
                "{message:?}"
            );
            crate::error::fencelock_error_free(error);

            // A caller built against a later header: room for more, and a marker past our fields.
            let mut bigger = vec![0xa5u64; size_of::<fencelock_metrics>() / 8 + 4];
            let out = bigger.as_mut_ptr().cast::<fencelock_metrics>();
            addr_of_mut!((*out).size).write(bigger.len() * 8);
            assert_eq!(
                fencelock_client_metrics(client, out, ptr::null_mut()),
                FENCELOCK_STATUS_OK
            );
            assert_eq!((*out).size, size_of::<fencelock_metrics>());
            assert_eq!((*out).acquired, 0);
            assert_eq!((*out).n_failed, ErrorKind::ALL.len());
            assert_eq!((*out).latency_p50_ns, FENCELOCK_LATENCY_NONE);
            assert!(
                bigger[size_of::<fencelock_metrics>() / 8..]
                    .iter()
                    .all(|word| *word == 0xa5),
                "past the struct"
            );

            assert_eq!(
                fencelock_client_metrics(ptr::null(), out, ptr::null_mut()),
                FENCELOCK_STATUS_NULL_ARGUMENT
            );
            assert_eq!(
                fencelock_client_metrics(client, ptr::null_mut(), ptr::null_mut()),
                FENCELOCK_STATUS_NULL_ARGUMENT
            );
            crate::client::fencelock_client_free(client);
        }
    }
}
