using System;
using System.Reflection;
using System.Threading;

namespace FenceLock
{
    /// <summary>
    /// Housekeeping for the fencelock thread that calls into managed
    /// code (every callback): on Mono they must not hold up process exit.
    ///
    /// Mono attaches a native thread that calls a delegate as a background
    /// thread, and at shutdown it aborts every background thread and waits,
    /// without a time limit, for each to end. fencelock's callback thread sits
    /// in native code for the life of the process and never end, so a Mono
    /// program that received one callback would hang after Main returns (and
    /// in Environment.Exit). Mono skips threads flagged
    /// MONO_THREAD_FLAG_DONT_MANAGE (its own thread-pool threads carry it);
    /// we set that flag on each callback thread the first time it calls in.
    /// Modern .NET does not wait for such threads, so there this does nothing.
    /// </summary>
    internal static class CallbackThread
    {
        private const long MonoThreadFlagDontManage = 1; // mono/metadata/threads-types.h

        private static readonly FieldInfo InternalThreadField = MonoField(typeof(Thread), "internal_thread");
        private static readonly FieldInfo FlagsField =
            InternalThreadField == null ? null : MonoField(InternalThreadField.FieldType, "flags");

        [ThreadStatic] private static bool entered;

        /// <summary>Call first in every native callback; cheap after the thread's first call.</summary>
        internal static void Enter()
        {
            if (entered) return;
            entered = true;
            if (FlagsField == null) return;
            try
            {
                var internalThread = InternalThreadField.GetValue(Thread.CurrentThread);
                var flags = ((IntPtr)FlagsField.GetValue(internalThread)).ToInt64();
                FlagsField.SetValue(internalThread, new IntPtr(flags | MonoThreadFlagDontManage));
            }
            catch (Exception)
            {
                // Never unwind into native code; the worst case is Mono's hang at exit.
            }
        }

        // Only on Mono: the field layout is Mono's (mcs/class/corlib/System.Threading/Thread.cs).
        private static FieldInfo MonoField(Type type, string name)
        {
            if (Type.GetType("Mono.Runtime") == null) return null;
            return type.GetField(name, BindingFlags.Instance | BindingFlags.NonPublic);
        }
    }
}
