using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// <c>fencelock_inspect_async</c> as a task of one <see cref="NodeLockState"/>
    /// per node: the callback copies the native inspection (which is its to
    /// free) and frees it at once.
    /// </summary>
    internal sealed class InspectOperation : NativeOperation<IReadOnlyList<NodeLockState>>
    {
        // Static: the native side holds only the function pointer.
        internal static readonly NativeMethods.InspectCallback Callback = OnInspected;

        internal InspectOperation(CancellationToken cancellationToken) : base(cancellationToken) { }

        private static void OnInspected(IntPtr userData, int status, IntPtr inspection, IntPtr error)
        {
            CallbackThread.Enter();
            // Owned from here on, whatever happens next.
            using (var owned = new InspectionSafeHandle(inspection))
            {
                try
                {
                    TakeUserData<InspectOperation>(userData).Complete(status, owned, error);
                }
                catch (Exception e)
                {
                    ReportCallbackBug(e);
                }
            }
        }

        private void Complete(int status, InspectionSafeHandle inspection, IntPtr error)
        {
            Finish();
            if (status == (int)FenceLockStatus.Ok)
            {
                TrySetResult(Copy(inspection));
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

        private static IReadOnlyList<NodeLockState> Copy(InspectionSafeHandle inspection)
        {
            var count = (int)NativeMethods.fencelock_inspection_node_count(inspection).ToUInt64();
            var states = new List<NodeLockState>(count);
            for (var i = 0; i < count; i++)
            {
                var entry = NativeMethods.fencelock_inspection_node(inspection, (UIntPtr)(uint)i);
                if (entry == IntPtr.Zero) break;
                var native = Marshal.PtrToStructure<NativeMethods.NativeNodeLockState>(entry);
                var ttl = native.HasTtl != 0 ? TimeSpan.FromMilliseconds(native.TtlMs) : (TimeSpan?)null;
                var error = native.Error == IntPtr.Zero ? null : Utf8.Decode(native.Error);
                states.Add(new NodeLockState(Utf8.Decode(native.Node), native.Held != 0, ttl, native.FencingCounter,
                    checked((long)native.Waiters), error));
            }
            return states.AsReadOnly();
        }
    }
}
