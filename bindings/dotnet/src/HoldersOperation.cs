using System;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// <c>fencelock_semaphore_holders_async</c> as a task of the count of permits held.
    /// </summary>
    internal sealed class HoldersOperation : NativeOperation<int>
    {
        // Static: the native side holds only the function pointer.
        internal static readonly NativeMethods.HoldersCallback Callback = OnHolders;

        internal HoldersOperation(CancellationToken cancellationToken) : base(cancellationToken) { }

        private static void OnHolders(IntPtr userData, int status, UIntPtr holders, IntPtr error)
        {
            CallbackThread.Enter();
            try
            {
                TakeUserData<HoldersOperation>(userData).Complete(status, holders, error);
            }
            catch (Exception e)
            {
                ReportCallbackBug(e);
            }
        }

        private void Complete(int status, UIntPtr holders, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
            {
                // At most the semaphore's permits (FenceLockLimits.MaxPermits): never near int.MaxValue.
                TrySetResult((int)Math.Min(holders.ToUInt64(), int.MaxValue));
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
