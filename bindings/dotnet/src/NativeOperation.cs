using System;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;

namespace FenceLock
{
    /// <summary>Starts one native <c>_async</c> call with the given user data.</summary>
    internal delegate int StartNative(IntPtr userData, out IntPtr operation, ref IntPtr error);

    /// <summary>
    /// One native asynchronous call bridged to a <see cref="Task{T}"/>: no
    /// thread waits while it runs.
    ///
    /// The object itself travels through the ABI as <c>user_data</c> in a
    /// <see cref="GCHandle"/>, which keeps it alive while only native code
    /// references it; the callback frees that handle, exactly once, because
    /// the ABI promises exactly one callback per started operation (and none
    /// when the start fails, where <see cref="Start"/> frees it instead).
    ///
    /// Callbacks arrive on libfencelock's callback thread. The task is created
    /// with <see cref="TaskCreationOptions.RunContinuationsAsynchronously"/> so
    /// the caller's continuation runs on the thread pool, never on that thread
    /// (where slow user code would delay every other callback of the process).
    /// </summary>
    internal abstract class NativeOperation<T>
    {
        private readonly TaskCompletionSource<T> completion =
            new TaskCompletionSource<T>(TaskCreationOptions.RunContinuationsAsynchronously);
        private readonly object gate = new object();
        private OperationSafeHandle operation;
        private CancellationTokenRegistration registration;
        private bool finished;

        protected NativeOperation(CancellationToken cancellationToken)
        {
            CancellationToken = cancellationToken;
        }

        /// <summary>The caller's token; cancelling it calls <c>fencelock_operation_cancel</c>.</summary>
        protected CancellationToken CancellationToken { get; }

        /// <summary>
        /// Starts the call. Usage errors (bad argument) throw here; other
        /// start failures give a faulted task.
        /// </summary>
        internal Task<T> Start(StartNative start)
        {
            if (CancellationToken.IsCancellationRequested) return Task.FromCanceled<T>(CancellationToken);
            var self = GCHandle.Alloc(this);
            var error = IntPtr.Zero;
            IntPtr started;
            int status;
            try
            {
                status = start(GCHandle.ToIntPtr(self), out started, ref error);
            }
            catch
            {
                self.Free(); // e.g. ObjectDisposedException from a closed SafeHandle: nothing started
                throw;
            }
            if (status != (int)FenceLockStatus.Ok)
            {
                self.Free(); // the ABI calls no callback when the start fails
                return StartFailed(status, error);
            }
            Track(new OperationSafeHandle(started));
            return completion.Task;
        }

        /// <summary>Recovers the operation from <c>user_data</c> and frees the GCHandle (once, in the callback).</summary>
        protected static TOperation TakeUserData<TOperation>(IntPtr userData) where TOperation : class
        {
            var handle = GCHandle.FromIntPtr(userData);
            var target = (TOperation)handle.Target;
            handle.Free();
            return target;
        }

        /// <summary>Drops the cancellation hook and the native operation handle; call first in every callback.</summary>
        protected void Finish()
        {
            OperationSafeHandle started;
            CancellationTokenRegistration hook;
            lock (gate)
            {
                finished = true;
                started = operation;
                hook = registration;
                operation = null;
                registration = default(CancellationTokenRegistration);
            }
            hook.Dispose(); // may wait for a cancel call running elsewhere, which never blocks
            if (started != null) started.Dispose();
        }

        /// <summary>Completes the task with a result.</summary>
        protected bool TrySetResult(T result) => completion.TrySetResult(result);

        /// <summary>Completes the task as cancelled by the caller's token.</summary>
        protected void SetCanceled() => completion.TrySetCanceled(CancellationToken);

        /// <summary>Completes the task with the exception for a failed status (frees the error object).</summary>
        protected void SetFailed(int status, IntPtr error)
        {
            completion.TrySetException(NativeErrors.ToException(status, error, CancellationToken));
        }

        /// <summary>Last resort for a bug inside a callback: an exception must never unwind into native code.</summary>
        protected static void ReportCallbackBug(Exception e)
        {
            try { Console.Error.WriteLine("fencelock: unexpected error in a native callback: " + e); }
            catch { /* nothing left to do */ }
        }

        private Task<T> StartFailed(int status, IntPtr error)
        {
            var exception = NativeErrors.ToException(status, error, CancellationToken);
            if (NativeErrors.IsUsageError(status)) throw exception;
            return Task.FromException<T>(exception);
        }

        // Keeps the native handle for cancellation. The callback may already
        // have run (it can fire before the start function returns), hence the
        // `finished` checks under the lock.
        private void Track(OperationSafeHandle started)
        {
            lock (gate)
            {
                if (finished)
                {
                    started.Dispose();
                    return;
                }
                operation = started;
            }
            if (!CancellationToken.CanBeCanceled) return;
            var hook = CancellationToken.Register(state => ((NativeOperation<T>)state).RequestCancel(), this);
            lock (gate)
            {
                if (!finished)
                {
                    registration = hook;
                    return;
                }
            }
            hook.Dispose();
        }

        private void RequestCancel()
        {
            OperationSafeHandle started;
            lock (gate) started = finished ? null : operation;
            if (started == null) return;
            try
            {
                // The callback then fires once with CANCELLED, unless it already started.
                NativeMethods.fencelock_operation_cancel(started);
            }
            catch (ObjectDisposedException)
            {
                // Finished meanwhile: nothing to cancel.
            }
        }
    }
}
