using System;

namespace FenceLock
{
    /// <summary>
    /// Copies a <see cref="LockOptions"/> into a native
    /// <c>fencelock_lock_options</c>, calling a setter only for what was set
    /// so every default stays the client's.
    /// </summary>
    internal static class NativeLockOptions
    {
        /// <summary>
        /// A native copy of <paramref name="options"/>; <paramref name="forceWaitMs"/>
        /// overrides the wait (a try is one attempt).
        /// </summary>
        internal static LockOptionsSafeHandle Create(LockOptions options, ulong? forceWaitMs)
        {
            if (options == null) throw new ArgumentNullException(nameof(options));
            var ttlMs = Durations.Ttl(options.Ttl, "options.Ttl");
            ulong? waitMs = forceWaitMs
                ?? (options.Wait.HasValue ? Durations.Wait(options.Wait.Value, "options.Wait") : (ulong?)null);
            ulong? maxHoldMs = options.MaxHold.HasValue ? Durations.Cap(options.MaxHold.Value, "options.MaxHold") : (ulong?)null;
            IntPtr pointer;
            Check(NativeMethods.fencelock_lock_options_new(ttlMs, out pointer));
            var native = new LockOptionsSafeHandle(pointer);
            try
            {
                if (waitMs.HasValue) Check(NativeMethods.fencelock_lock_options_set_wait_ms(native, waitMs.Value));
                if (options.AutoRenew.HasValue)
                    Check(NativeMethods.fencelock_lock_options_set_auto_renew(native, options.AutoRenew.Value));
                if (maxHoldMs.HasValue) Check(NativeMethods.fencelock_lock_options_set_max_hold_ms(native, maxHoldMs.Value));
                if (options.MaxRenewals.HasValue)
                    Check(NativeMethods.fencelock_lock_options_set_max_renewals(native, options.MaxRenewals.Value));
                if (options.Fair) Check(NativeMethods.fencelock_lock_options_set_fair(native, true));
                return native;
            }
            catch
            {
                native.Dispose();
                throw;
            }
        }

        private static void Check(int status) => NativeErrors.Check(status, IntPtr.Zero);
    }
}
