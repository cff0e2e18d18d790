using System;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// A lock's own lost callback (<c>fencelock_lock_on_lost</c>): the native
    /// lock calls it once, on fencelock's callback thread, with the reason.
    ///
    /// The user data is a weak <see cref="GCHandle"/> to the
    /// <see cref="FenceLockHandle"/>: a handle dropped without Dispose stays
    /// collectable, so its SafeHandle's finalizer frees the native lock and
    /// renewal stops. The GCHandle is freed only after
    /// <c>fencelock_lock_free</c> returned, when the ABI guarantees no call of
    /// the callback runs or can start, so the callback never sees a freed one.
    /// </summary>
    internal static class LossCallback
    {
        private static readonly NativeMethods.LostCallback Callback = OnLost;

        /// <summary>Makes <paramref name="native"/> report its loss to <paramref name="handle"/>.</summary>
        internal static void Attach(LockSafeHandle native, FenceLockHandle handle)
        {
            var target = GCHandle.Alloc(handle, GCHandleType.Weak);
            var error = IntPtr.Zero;
            var status = NativeMethods.fencelock_lock_on_lost(native, Callback, GCHandle.ToIntPtr(target), ref error);
            if (status != (int)FenceLockStatus.Ok)
            {
                target.Free();
                NativeErrors.Check(status, error);
            }
            native.FreeAfterRelease(target);
        }

        private static void OnLost(IntPtr userData, int reason)
        {
            CallbackThread.Enter();
            try
            {
                var handle = GCHandle.FromIntPtr(userData).Target as FenceLockHandle;
                handle?.OnLost((LockLossReason)reason);
            }
            catch (Exception e)
            {
                // Never unwind into native code.
                try { Console.Error.WriteLine("fencelock: unexpected error in the lost callback: " + e); }
                catch { }
            }
        }
    }
}
