using System;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// Base of every native object handle: owns one pointer and frees it
    /// exactly once. <see cref="SafeHandle"/> counts the P/Invoke calls in
    /// flight, so a Dispose on one thread while another thread is inside a
    /// native call defers the free until that call returns; a call after
    /// Dispose throws <see cref="ObjectDisposedException"/> instead of
    /// passing a dangling pointer.
    /// </summary>
    internal abstract class NativeSafeHandle : SafeHandle
    {
        protected NativeSafeHandle(IntPtr pointer) : base(IntPtr.Zero, true)
        {
            SetHandle(pointer);
        }

        /// <summary>NULL is the invalid value: every fencelock object is a non-NULL pointer.</summary>
        public override bool IsInvalid => handle == IntPtr.Zero;
    }

    /// <summary>A <c>fencelock_client *</c>; freeing closes the client without network I/O.</summary>
    internal sealed class ClientSafeHandle : NativeSafeHandle
    {
        internal ClientSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_client_free(handle);
            return true;
        }
    }

    /// <summary>A <c>fencelock_observation *</c>; freeing ends its subscriptions and its pending reads.</summary>
    internal sealed class ObservationSafeHandle : NativeSafeHandle
    {
        internal ObservationSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_observation_free(handle);
            return true;
        }
    }

    /// <summary>
    /// A <c>fencelock_lock *</c>. Freeing stops renewal without blocking and
    /// leaves the key to its ttl, which is also what the finalizer does when a
    /// handle is forgotten: no network I/O ever happens on the finalizer thread.
    /// </summary>
    internal sealed class LockSafeHandle : NativeSafeHandle
    {
        private GCHandle lostCallbackTarget;

        internal LockSafeHandle(IntPtr pointer) : base(pointer) { }

        /// <summary>Frees <paramref name="target"/> once the native lock is freed (its lost callback's user data).</summary>
        internal void FreeAfterRelease(GCHandle target)
        {
            lostCallbackTarget = target;
        }

        protected override bool ReleaseHandle()
        {
            // Returns once no call of the lock's lost callback runs or can start.
            NativeMethods.fencelock_lock_free(handle);
            if (lostCallbackTarget.IsAllocated) lostCallbackTarget.Free();
            return true;
        }
    }

    /// <summary>A <c>fencelock_error *</c>, read once into an exception and freed.</summary>
    internal sealed class ErrorSafeHandle : NativeSafeHandle
    {
        internal ErrorSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_error_free(handle);
            return true;
        }
    }

    /// <summary>A <c>fencelock_inspection *</c>, read once into <see cref="NodeLockState"/>s and freed.</summary>
    internal sealed class InspectionSafeHandle : NativeSafeHandle
    {
        internal InspectionSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_inspection_free(handle);
            return true;
        }
    }

    /// <summary>A <c>fencelock_options *</c>, alive only while a client is being made.</summary>
    internal sealed class OptionsSafeHandle : NativeSafeHandle
    {
        internal OptionsSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_options_free(handle);
            return true;
        }
    }

    /// <summary>A <c>fencelock_lock_options *</c>, alive only while an acquire is being started.</summary>
    internal sealed class LockOptionsSafeHandle : NativeSafeHandle
    {
        internal LockOptionsSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_lock_options_free(handle);
            return true;
        }
    }

    /// <summary>
    /// A <c>fencelock_operation *</c>, kept while an async call is in flight
    /// so a <see cref="System.Threading.CancellationToken"/> can cancel it.
    /// Freeing does not cancel.
    /// </summary>
    internal sealed class OperationSafeHandle : NativeSafeHandle
    {
        internal OperationSafeHandle(IntPtr pointer) : base(pointer) { }

        protected override bool ReleaseHandle()
        {
            NativeMethods.fencelock_operation_free(handle);
            return true;
        }
    }
}
