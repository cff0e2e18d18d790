using System;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// <c>fencelock_acquire_async</c> as a task of <see cref="FenceLockHandle"/>.
    /// For <see cref="FenceLockClient.TryAcquireAsync(string, System.TimeSpan, System.Threading.CancellationToken)"/> a lock held elsewhere
    /// is a null result rather than an exception.
    /// </summary>
    internal sealed class AcquireOperation : NativeOperation<FenceLockHandle>
    {
        // Kept in a static field: the native side holds only the function
        // pointer, so the delegate must never be collected.
        internal static readonly NativeMethods.AcquireCallback Callback = OnAcquired;

        private readonly bool heldIsNull;

        internal AcquireOperation(bool heldIsNull, CancellationToken cancellationToken)
            : base(cancellationToken)
        {
            this.heldIsNull = heldIsNull;
        }

        private static void OnAcquired(IntPtr userData, int status, IntPtr lockPtr, IntPtr error)
        {
            CallbackThread.Enter();
            try
            {
                TakeUserData<AcquireOperation>(userData).Complete(status, lockPtr, error);
            }
            catch (Exception e)
            {
                ReportCallbackBug(e);
            }
        }

        private void Complete(int status, IntPtr lockPtr, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
                Succeed(new LockSafeHandle(lockPtr));
            else if (status == (int)FenceLockStatus.NotAcquired && heldIsNull)
                Discard(error, null);
            else if (status == (int)FenceLockStatus.Cancelled)
                Discard(error, SetCanceled);
            else
                SetFailed(status, error);
        }

        private void Succeed(LockSafeHandle native)
        {
            FenceLockHandle handle;
            try
            {
                handle = new FenceLockHandle(native);
            }
            catch
            {
                native.Dispose(); // not handed out: stop renewal, the key expires at its ttl
                throw;
            }
            // An acquire that succeeded just as the caller cancelled still
            // returns the lock: it is held, and the caller must release it.
            if (!TrySetResult(handle)) handle.Dispose();
        }

        private void Discard(IntPtr error, Action then)
        {
            NativeMethods.fencelock_error_free(error);
            if (then != null) then();
            else TrySetResult(null);
        }
    }
}
