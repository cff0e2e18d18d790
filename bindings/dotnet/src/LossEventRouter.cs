using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// Delivers a client's lost-lock events to the live
    /// <see cref="FenceLockHandle"/>s, found by (resource, fencing token)
    /// which the ABI guarantees unique per resource.
    ///
    /// Why the event callback and not a thread pulling
    /// <c>fencelock_client_next_event</c>: a pull thread per client would sit
    /// blocked for the client's whole life; the callback costs no thread and
    /// delivers at once. The callback only looks the handle up and queues the
    /// cancellation on the thread pool, so user code registered on
    /// <see cref="FenceLockHandle.LostToken"/> never runs on the fencelock
    /// callback thread.
    ///
    /// Why <c>user_data</c> is a number and not a GCHandle: the client's event
    /// hub outlives the client (locks keep being renewed, and can be lost,
    /// after <c>fencelock_client_free</c>), and a call in flight may still see
    /// the old user data after the callback is replaced. A number looked up in
    /// <see cref="Routers"/> can never dangle: an unknown one is ignored.
    /// </summary>
    internal sealed class LossEventRouter
    {
        private static readonly NativeMethods.EventCallback Callback = OnEvent;
        private static readonly ConcurrentDictionary<long, LossEventRouter> Routers =
            new ConcurrentDictionary<long, LossEventRouter>();
        private static long lastId;

        private readonly long id = Interlocked.Increment(ref lastId);
        // Weak: a handle dropped without Dispose must stay collectable, so its
        // SafeHandle's finalizer frees the lock and renewal stops (as a Rust
        // Lock's Drop does) instead of this table renewing it forever.
        private readonly ConcurrentDictionary<LockKey, WeakReference<FenceLockHandle>> handles =
            new ConcurrentDictionary<LockKey, WeakReference<FenceLockHandle>>();
        private volatile bool clientClosed;
        private int registrations;

        /// <summary>Makes a router and subscribes it to the client's events (once per client).</summary>
        internal static LossEventRouter Attach(ClientSafeHandle client)
        {
            var router = new LossEventRouter();
            Routers[router.id] = router;
            var status = NativeMethods.fencelock_client_set_event_callback(client, Callback, new IntPtr(router.id));
            if (status != (int)FenceLockStatus.Ok)
            {
                router.ClientClosed();
                NativeErrors.Check(status, IntPtr.Zero);
            }
            return router;
        }

        /// <summary>Starts routing events for <paramref name="handle"/>.</summary>
        internal void Register(FenceLockHandle handle)
        {
            // An acquire that finishes after the client was disposed still
            // needs its events: make sure the router is reachable again.
            Routers[id] = this;
            handles[new LockKey(handle.Resource, handle.FencingToken)] = new WeakReference<FenceLockHandle>(handle);
            if (Interlocked.Increment(ref registrations) % 256 == 0) SweepCollected();
        }

        /// <summary>Stops routing events for <paramref name="handle"/>.</summary>
        internal void Unregister(FenceLockHandle handle)
        {
            WeakReference<FenceLockHandle> removed;
            handles.TryRemove(new LockKey(handle.Resource, handle.FencingToken), out removed);
            ForgetIfIdle();
        }

        /// <summary>The client was disposed: forget the router once its last handle goes.</summary>
        internal void ClientClosed()
        {
            clientClosed = true;
            ForgetIfIdle();
        }

        // Drops the entries of handles collected without Dispose.
        private void SweepCollected()
        {
            FenceLockHandle alive;
            WeakReference<FenceLockHandle> removed;
            foreach (var entry in handles)
                if (!entry.Value.TryGetTarget(out alive)) handles.TryRemove(entry.Key, out removed);
        }

        private void ForgetIfIdle()
        {
            LossEventRouter removed;
            if (clientClosed && handles.IsEmpty) Routers.TryRemove(id, out removed);
        }

        private static void OnEvent(IntPtr userData, IntPtr nativeEvent)
        {
            CallbackThread.Enter();
            try
            {
                LossEventRouter router;
                if (!Routers.TryGetValue(userData.ToInt64(), out router)) return;
                var lost = Marshal.PtrToStructure<NativeMethods.NativeEvent>(nativeEvent);
                var key = new LockKey(Utf8.Decode(lost.Resource), lost.FencingToken);
                WeakReference<FenceLockHandle> entry;
                FenceLockHandle handle;
                if (router.handles.TryGetValue(key, out entry) && entry.TryGetTarget(out handle))
                    handle.OnLost((LockLossReason)lost.Reason);
            }
            catch (Exception e)
            {
                // Never unwind into native code.
                try { Console.Error.WriteLine("fencelock: unexpected error in the event callback: " + e); }
                catch { }
            }
        }

        private struct LockKey : IEquatable<LockKey>
        {
            private readonly string resource;
            private readonly ulong token;

            internal LockKey(string resource, ulong token)
            {
                this.resource = resource;
                this.token = token;
            }

            public bool Equals(LockKey other) => token == other.token && string.Equals(resource, other.resource);

            public override bool Equals(object obj) => obj is LockKey && Equals((LockKey)obj);

            public override int GetHashCode() => (resource ?? "").GetHashCode() * 31 + token.GetHashCode();
        }
    }
}
