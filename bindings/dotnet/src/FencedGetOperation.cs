using System;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// <c>fencelock_fenced_get_async</c> as a task of <see cref="FencedValue"/>: the
    /// callback copies the native value (which is its to free) and frees it at once.
    /// </summary>
    internal sealed class FencedGetOperation : NativeOperation<FencedValue>
    {
        // Static: the native side holds only the function pointer.
        internal static readonly NativeMethods.FencedValueCallback Callback = OnValue;

        internal FencedGetOperation(CancellationToken cancellationToken) : base(cancellationToken) { }

        private static void OnValue(IntPtr userData, int status, IntPtr value, ulong token, IntPtr error)
        {
            CallbackThread.Enter();
            try
            {
                TakeUserData<FencedGetOperation>(userData).Complete(status, value, token, error);
            }
            catch (Exception e)
            {
                ReportCallbackBug(e);
            }
            finally
            {
                // Owned by this callback whatever happened above (NULL when absent or on failure).
                NativeMethods.fencelock_string_free(value);
            }
        }

        private void Complete(int status, IntPtr value, ulong token, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
            {
                TrySetResult(new FencedValue(Utf8.Decode(value), token));
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
