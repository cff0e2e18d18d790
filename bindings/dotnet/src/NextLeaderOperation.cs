using System;
using System.Runtime.InteropServices;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// <c>fencelock_observation_next_async</c> as a task of <see cref="Leader"/>: null once the
    /// observation ended (<c>CLOSED</c>: its client was disposed).
    /// </summary>
    internal sealed class NextLeaderOperation : NativeOperation<Leader>
    {
        // Static: the native side holds only the function pointer.
        internal static readonly NativeMethods.LeaderCallback Callback = OnLeader;

        internal NextLeaderOperation(CancellationToken cancellationToken) : base(cancellationToken) { }

        private static void OnLeader(IntPtr userData, int status, IntPtr leader, IntPtr error)
        {
            CallbackThread.Enter();
            try
            {
                TakeUserData<NextLeaderOperation>(userData).Complete(status, leader, error);
            }
            catch (Exception e)
            {
                ReportCallbackBug(e);
            }
        }

        private void Complete(int status, IntPtr leader, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
            {
                TrySetResult(Copy(leader)); // the native leader is lent for this call only
            }
            else if (status == (int)FenceLockStatus.Cancelled)
            {
                NativeMethods.fencelock_error_free(error);
                SetCanceled();
            }
            else if (status == (int)FenceLockStatus.Closed)
            {
                NativeMethods.fencelock_error_free(error);
                TrySetResult(null);
            }
            else
            {
                SetFailed(status, error);
            }
        }

        private static Leader Copy(IntPtr leader)
        {
            var native = Marshal.PtrToStructure<NativeMethods.NativeLeader>(leader);
            var value = new byte[checked((int)native.ValueLen.ToUInt64())];
            if (value.Length > 0) Marshal.Copy(native.Value, value, 0, value.Length);
            return new Leader(native.Epoch, value);
        }
    }
}
