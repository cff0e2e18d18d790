using System;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// A native call without a result (<c>fencelock_lock_release_async</c>,
    /// <c>fencelock_lock_extend_async</c>) as a task that completes with the
    /// status, or faults with the matching exception.
    /// </summary>
    internal sealed class DoneOperation : NativeOperation<bool>
    {
        /// <summary>The callback for operations awaited through a task (static: never collected).</summary>
        internal static readonly NativeMethods.DoneCallback Callback = OnDone;

        /// <summary>
        /// The callback for fire-and-forget releases (<see cref="FenceLockHandle.Dispose"/>):
        /// no user data, it only frees the error object.
        /// </summary>
        internal static readonly NativeMethods.DoneCallback Discard = OnDiscarded;

        internal DoneOperation(CancellationToken cancellationToken) : base(cancellationToken) { }

        private static void OnDone(IntPtr userData, int status, IntPtr error)
        {
            CallbackThread.Enter();
            try
            {
                TakeUserData<DoneOperation>(userData).Complete(status, error);
            }
            catch (Exception e)
            {
                ReportCallbackBug(e);
            }
        }

        private static void OnDiscarded(IntPtr userData, int status, IntPtr error)
        {
            CallbackThread.Enter();
            // A failed background release leaves the key to its ttl; nobody is waiting to hear.
            NativeMethods.fencelock_error_free(error);
        }

        private void Complete(int status, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
            {
                TrySetResult(true);
            }
            else if (status == (int)FenceLockStatus.Cancelled)
            {
                NativeMethods.fencelock_error_free(error);
                SetCanceled();
            }
            else
            {
                SetFailed(status, error);
            }
        }
    }
}
