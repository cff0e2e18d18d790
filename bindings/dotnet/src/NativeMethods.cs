using System;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// The C ABI of libfencelock (include/fencelock.h), one declaration per
    /// function. Objects passed in are <see cref="SafeHandle"/>s so that a
    /// Dispose racing a call on another thread waits for the call to return
    /// (the header forbids freeing an object another thread is using).
    /// Objects coming out are raw pointers, wrapped by the caller at once.
    /// </summary>
    internal static class NativeMethods
    {
        // "fencelock" resolves to libfencelock.so on Linux for both Mono and
        // modern .NET (which also finds it under runtimes/linux-x64/native).
        private const string Library = "fencelock";

        // ---- callbacks (fencelock runtime threads call these) --------------

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void AcquireCallback(IntPtr userData, int status, IntPtr lockPtr, IntPtr error);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void DoneCallback(IntPtr userData, int status, IntPtr error);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void LostCallback(IntPtr userData, int reason);

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void LeaderCallback(IntPtr userData, int status, IntPtr leader, IntPtr error);

        /// <summary>fencelock_inspect_callback: the inspection is the callback's to free.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void InspectCallback(IntPtr userData, int status, IntPtr inspection, IntPtr error);

        /// <summary>fencelock_fenced_value_callback: the value (NULL when absent) is the callback's to free.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void FencedValueCallback(IntPtr userData, int status, IntPtr value, ulong token, IntPtr error);

        /// <summary>fencelock_holders_callback: the count (0 on failure).</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void HoldersCallback(IntPtr userData, int status, UIntPtr holders, IntPtr error);

        /// <summary>fencelock_log_callback: the record is lent for the call only.</summary>
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void LogCallback(IntPtr record, IntPtr userData);

        /// <summary>struct fencelock_log_record (every string NUL-terminated UTF-8, never NULL).</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeLogRecord
        {
            internal int Level;
            internal IntPtr Target;
            internal IntPtr Message;
            internal IntPtr Fields;
            internal IntPtr Line;
        }

        /// <summary>struct fencelock_limits.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeLimits
        {
            internal ulong MinTtlMs;
            internal ulong MaxTtlMs;
            internal ulong MaxWaitMs;
            internal UIntPtr MaxResourceBytes;
            internal UIntPtr MaxPrefixBytes;
            internal ulong MaxFencingToken;
            internal ulong MaxHolderId;
            internal double MaxDriftFactor;
            internal UIntPtr MaxLeaderValueBytes;
            internal uint MaxPermits;
        }

        /// <summary>struct fencelock_failure_count.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeFailureCount
        {
            internal int Kind;
            internal ulong Count;
        }

        /// <summary>struct fencelock_loss_count.</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeLossCount
        {
            internal int Reason;
            internal ulong Count;
        }

        /// <summary>
        /// struct fencelock_metrics (the first version; the C side writes no
        /// byte past <see cref="Size"/>, so this layout keeps working with later libraries).
        /// </summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeMetrics
        {
            /// <summary>FENCELOCK_METRICS_MAX_KINDS.</summary>
            internal const int MaxKinds = 32;
            /// <summary>FENCELOCK_METRICS_MAX_REASONS.</summary>
            internal const int MaxReasons = 16;
            /// <summary>FENCELOCK_LATENCY_BUCKET_COUNT.</summary>
            internal const int BucketCount = 14;
            /// <summary>FENCELOCK_LATENCY_NONE.</summary>
            internal const ulong NoEstimate = ulong.MaxValue;

            internal UIntPtr Size;
            internal ulong Acquired;
            internal ulong Released;
            internal ulong Renewals;
            internal ulong RenewalFailures;
            internal ulong Held;
            internal ulong Waiting;
            internal UIntPtr NFailed;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = MaxKinds)]
            internal NativeFailureCount[] Failed;
            internal UIntPtr NLost;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = MaxReasons)]
            internal NativeLossCount[] Lost;
            internal ulong LatencyCount;
            internal ulong LatencySumNs;
            [MarshalAs(UnmanagedType.ByValArray, SizeConst = BucketCount)]
            internal ulong[] LatencyBuckets;
            internal ulong LatencyP50Ns;
            internal ulong LatencyP99Ns;
        }

        /// <summary>struct fencelock_leader (the value is borrowed for the callback only).</summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeLeader
        {
            internal ulong Epoch;
            internal IntPtr Value;
            internal UIntPtr ValueLen;
        }

        /// <summary>
        /// struct fencelock_node_lock_state, owned by its inspection (later
        /// versions only append fields). The C <c>bool</c>s are read as bytes.
        /// </summary>
        [StructLayout(LayoutKind.Sequential)]
        internal struct NativeNodeLockState
        {
            internal IntPtr Node;
            internal byte Held;
            internal byte HasTtl;
            internal ulong TtlMs;
            internal ulong FencingCounter;
            internal ulong Waiters;
            internal IntPtr Error;
        }

        // ---- client -------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_client_new(IntPtr[] urls, UIntPtr nUrls, OptionsSafeHandle options,
            out IntPtr client, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_client_free(IntPtr client);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_client_metrics(ClientSafeHandle client, IntPtr metrics, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_latency_buckets();

        // ---- inspect ------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_inspect_async(ClientSafeHandle client, byte[] resource,
            InspectCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern UIntPtr fencelock_inspection_node_count(InspectionSafeHandle inspection);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_inspection_node(InspectionSafeHandle inspection, UIntPtr index);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_inspection_free(IntPtr inspection);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_on_lost(LockSafeHandle lockHandle, LostCallback callback,
            IntPtr userData, ref IntPtr error);

        // ---- errors -------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_error_status(ErrorSafeHandle error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_error_message(ErrorSafeHandle error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern UIntPtr fencelock_error_node_count(ErrorSafeHandle error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_error_node(ErrorSafeHandle error, UIntPtr index,
            out IntPtr node, out int outcome, out IntPtr detail);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_error_free(IntPtr error);

        // ---- locks --------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_acquire_async(ClientSafeHandle client, byte[] resource,
            ulong ttlMs, ulong waitMs, AcquireCallback callback, IntPtr userData,
            out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_acquire_with_async(ClientSafeHandle client, byte[] resource,
            LockOptionsSafeHandle options, AcquireCallback callback, IntPtr userData,
            out IntPtr operation, ref IntPtr error);

        // ---- leader election ----------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_campaign_async(ClientSafeHandle client, byte[] name,
            ulong ttlMs, ulong waitMs, byte[] value, UIntPtr valueLen, AcquireCallback callback, IntPtr userData,
            out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_observe(ClientSafeHandle client, byte[] name,
            out IntPtr observation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_observation_next_async(ObservationSafeHandle observation,
            LeaderCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_observation_free(IntPtr observation);

        // ---- semaphores ----------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_semaphore_acquire_async(ClientSafeHandle client, byte[] name,
            uint permits, ulong ttlMs, ulong waitMs, AcquireCallback callback, IntPtr userData,
            out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_semaphore_acquire_with_async(ClientSafeHandle client, byte[] name,
            uint permits, LockOptionsSafeHandle options, AcquireCallback callback, IntPtr userData,
            out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_semaphore_holders_async(ClientSafeHandle client, byte[] name, uint permits,
            HoldersCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        [return: MarshalAs(UnmanagedType.I1)]
        internal static extern bool fencelock_lock_permit(LockSafeHandle lockHandle, out uint permit);

        // ---- read-write locks ----------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_rw_read_async(ClientSafeHandle client, byte[] name, ulong ttlMs,
            ulong waitMs, AcquireCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_rw_read_with_async(ClientSafeHandle client, byte[] name,
            LockOptionsSafeHandle options, AcquireCallback callback, IntPtr userData, out IntPtr operation,
            ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_rw_write_async(ClientSafeHandle client, byte[] name, ulong ttlMs,
            ulong waitMs, AcquireCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_rw_write_with_async(ClientSafeHandle client, byte[] name,
            LockOptionsSafeHandle options, AcquireCallback callback, IntPtr userData, out IntPtr operation,
            ref IntPtr error);

        // ---- lock options -------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_new(ulong ttlMs, out IntPtr options);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_lock_options_free(IntPtr options);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_set_wait_ms(LockOptionsSafeHandle options, ulong waitMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_set_auto_renew(LockOptionsSafeHandle options,
            [MarshalAs(UnmanagedType.I1)] bool autoRenew);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_set_max_hold_ms(LockOptionsSafeHandle options, ulong maxHoldMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_set_max_renewals(LockOptionsSafeHandle options, uint maxRenewals);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_options_set_fair(LockOptionsSafeHandle options,
            [MarshalAs(UnmanagedType.I1)] bool fair);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_lock_resource(LockSafeHandle lockHandle);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_fencing_token(LockSafeHandle lockHandle, out ulong token);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_fence(LockSafeHandle lockHandle, out Fence fence);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_is_held(LockSafeHandle lockHandle,
            [MarshalAs(UnmanagedType.I1)] out bool held);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_remaining_ms(LockSafeHandle lockHandle, out ulong remainingMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_release_async(LockSafeHandle lockHandle, DoneCallback callback,
            IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_lock_extend_async(LockSafeHandle lockHandle, ulong ttlMs,
            DoneCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_lock_free(IntPtr lockHandle);

        // ---- operations ---------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_operation_cancel(OperationSafeHandle operation);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_operation_free(IntPtr operation);

        // ---- fenced writes -------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_fenced_set_async(ClientSafeHandle client, byte[] key, byte[] value,
            Fence fence, DoneCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_fenced_get_async(ClientSafeHandle client, byte[] key,
            FencedValueCallback callback, IntPtr userData, out IntPtr operation, ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_string_free(IntPtr value);

        // ---- options ------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_new(out IntPtr options);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern void fencelock_options_free(IntPtr options);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_key_prefix(OptionsSafeHandle options, byte[] prefix);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_node_timeout_ms(OptionsSafeHandle options, ulong timeoutMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_connect_timeout_ms(OptionsSafeHandle options, ulong timeoutMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_drift_factor(OptionsSafeHandle options, double factor);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_retry_ms(OptionsSafeHandle options, ulong baseMs, ulong maxMs);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_auto_renew(OptionsSafeHandle options,
            [MarshalAs(UnmanagedType.I1)] bool autoRenew);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_credentials(OptionsSafeHandle options,
            byte[] username, byte[] password);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_tls_ca_pem(OptionsSafeHandle options, byte[] pem, UIntPtr len);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_tls_client_cert_pem(OptionsSafeHandle options,
            byte[] cert, UIntPtr certLen, byte[] key, UIntPtr keyLen);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_options_set_tls_min_version(OptionsSafeHandle options, int version);

        // ---- logs ---------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_log_forward(LogCallback callback, IntPtr userData, int level,
            ref IntPtr error);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int fencelock_log_set_level(int level);

        // ---- misc ---------------------------------------------------------

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_status_name(int status);

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_get_limits();

        [DllImport(Library, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr fencelock_version();
    }
}
