// TraceSource.TraceEvent is [Conditional("TRACE")]: without this, a build
// that does not define TRACE (mcs by default) would compile the calls away.
#define TRACE

using System;
using System.Diagnostics;
using System.Runtime.InteropServices;

namespace FenceLock
{
    /// <summary>
    /// How much one of libfencelock's log records matters, most severe first.
    /// The numbers are the C ABI's <c>fencelock_log_level</c> and the shared
    /// table <c>log_levels</c> of <c>tests/vectors/protocol.json</c>; each is
    /// the event id a record reaches <see cref="FenceLockLog.Source"/> with.
    /// </summary>
    public enum FenceLockLogLevel
    {
        /// <summary>Something failed that the caller must know about (<see cref="TraceEventType.Error"/>).</summary>
        Error = 1,
        /// <summary>A lock was lost, a renewal failed, a node was unreachable (<see cref="TraceEventType.Warning"/>).</summary>
        Warn = 2,
        /// <summary>Rare, notable events (<see cref="TraceEventType.Information"/>).</summary>
        Info = 3,
        /// <summary>Each acquisition, release, extension and connection change (<see cref="TraceEventType.Verbose"/>).</summary>
        Debug = 4,
        /// <summary>Each renewal (<see cref="TraceEventType.Verbose"/>).</summary>
        Trace = 5,
    }

    /// <summary>
    /// libfencelock's log records (a lock acquired, released or lost, a
    /// renewal failed, a node unreachable…) as events of the
    /// <see cref="TraceSource"/> <see cref="Source"/>, named
    /// <c>"FenceLock"</c>. A record never carries a password or a lock's
    /// random token (it may carry fencing tokens, which are not secrets).
    /// </summary>
    /// <remarks>
    /// <para>Each record becomes one <see cref="TraceSource.TraceEvent(TraceEventType, int, string)"/>
    /// call: the event type by <see cref="EventTypeOf"/> (error → Error,
    /// warn → Warning, info → Information, debug and trace → Verbose), the
    /// id the record's <see cref="FenceLockLogLevel"/> number (so a listener
    /// can tell a debug record, 4, from a renewal at trace, 5), and the
    /// message its line: what happened, then <c>name=value</c> fields, as in
    /// <c>lock lost resource=jobs reason=…</c>.</para>
    /// <para>The library forwards only the records <c>Source.Switch</c> lets
    /// through: <see cref="SourceLevels.Off"/> (the default) and
    /// <see cref="SourceLevels.Critical"/> none, <see cref="SourceLevels.Error"/>
    /// errors, <see cref="SourceLevels.Warning"/> warnings too,
    /// <see cref="SourceLevels.Information"/> info too,
    /// <see cref="SourceLevels.Verbose"/> and <see cref="SourceLevels.All"/>
    /// every record, renewals included. It reads the switch when a
    /// <see cref="FenceLockClient"/> is created (the first creation starts
    /// the forwarding) and when <see cref="Refresh"/> is called, not on each
    /// record: configure the source (its switch level and listeners, in code
    /// or in the application's configuration file) before creating clients,
    /// and call <see cref="Refresh"/> after changing the level later.</para>
    /// <para>Records arrive on one fencelock thread, one at a time and in
    /// order, never on a thread that runs a lock operation; a listener that
    /// cannot keep up loses records (the next one says how many), and one
    /// that throws loses the record it threw on (the exception is dropped).</para>
    /// </remarks>
    public static class FenceLockLog
    {
        /// <summary>The name of <see cref="Source"/>: <c>"FenceLock"</c>, as configuration files name it.</summary>
        public const string SourceName = "FenceLock";

        private const int Off = 0; // FENCELOCK_LOG_OFF

        // Kept here for the life of the process: the native side calls it
        // from its log thread at any time after the first forwarding.
        private static readonly NativeMethods.LogCallback Callback = OnRecord;
        private static readonly object Gate = new object();
        private static bool forwarding; // fencelock_log_forward succeeded once (under Gate)

        /// <summary>
        /// The source every record goes to. Its switch starts at
        /// <see cref="SourceLevels.Off"/> unless the application's
        /// configuration file sets one for <c>"FenceLock"</c>; add listeners
        /// and set <c>Source.Switch.Level</c> before creating clients (or call
        /// <see cref="Refresh"/> after).
        /// </summary>
        public static TraceSource Source { get; } = new TraceSource(SourceName, SourceLevels.Off);

        /// <summary>
        /// Reads <c>Source.Switch</c> again and forwards, from now on, the
        /// records it lets through (none when it lets none through). Creating
        /// a <see cref="FenceLockClient"/> does the same.
        /// </summary>
        /// <exception cref="ArgumentException">libfencelock cannot forward its records in this
        /// process (another Rust <c>tracing</c> subscriber took its events).</exception>
        public static void Refresh()
        {
            Apply();
        }

        /// <summary>
        /// The event type a record at <paramref name="level"/> reaches
        /// <see cref="Source"/> with: error → <see cref="TraceEventType.Error"/>,
        /// warn → <see cref="TraceEventType.Warning"/>, info →
        /// <see cref="TraceEventType.Information"/>, debug and trace →
        /// <see cref="TraceEventType.Verbose"/>.
        /// </summary>
        /// <exception cref="ArgumentOutOfRangeException"><paramref name="level"/> is not a defined level.</exception>
        public static TraceEventType EventTypeOf(FenceLockLogLevel level)
        {
            TraceEventType type;
            if (!TryEventTypeOf((int)level, out type))
                throw new ArgumentOutOfRangeException(nameof(level), level, "not a FenceLockLogLevel");
            return type;
        }

        /// <summary>
        /// Called before each client connects, so that its own records
        /// (a node unreachable at start) follow the switch. A failure here
        /// never fails the client: it is told to <see cref="Source"/>.
        /// </summary>
        internal static void BeforeClientConnects()
        {
            try
            {
                Apply();
            }
            catch (Exception e)
            {
                try
                {
                    Source.TraceEvent(TraceEventType.Error, (int)FenceLockLogLevel.Error,
                        "could not forward libfencelock's log records: " + e.Message);
                }
                catch (Exception)
                {
                    // A listener failed too: nowhere left to tell.
                }
            }
        }

        /// <summary>
        /// The native threshold (<c>fencelock_log_level</c>) for a switch: the
        /// most verbose level whose event type the switch lets through, 0
        /// (<c>FENCELOCK_LOG_OFF</c>) when none.
        /// </summary>
        internal static int ThresholdOf(SourceSwitch sourceSwitch)
        {
            for (var level = (int)FenceLockLogLevel.Trace; level >= (int)FenceLockLogLevel.Error; level--)
            {
                TraceEventType type;
                if (TryEventTypeOf(level, out type) && sourceSwitch.ShouldTrace(type)) return level;
            }
            return Off;
        }

        private static void Apply()
        {
            lock (Gate)
            {
                var threshold = ThresholdOf(Source.Switch);
                if (threshold == Off)
                {
                    // Keep the callback; before the first forwarding there is nothing to stop.
                    if (forwarding) NativeErrors.Check(NativeMethods.fencelock_log_set_level(Off), IntPtr.Zero);
                    return;
                }
                var error = IntPtr.Zero;
                var status = NativeMethods.fencelock_log_forward(Callback, IntPtr.Zero, threshold, ref error);
                NativeErrors.Check(status, error);
                forwarding = true;
            }
        }

        private static bool TryEventTypeOf(int level, out TraceEventType type)
        {
            switch ((FenceLockLogLevel)level)
            {
                case FenceLockLogLevel.Error: type = TraceEventType.Error; return true;
                case FenceLockLogLevel.Warn: type = TraceEventType.Warning; return true;
                case FenceLockLogLevel.Info: type = TraceEventType.Information; return true;
                case FenceLockLogLevel.Debug: type = TraceEventType.Verbose; return true;
                case FenceLockLogLevel.Trace: type = TraceEventType.Verbose; return true;
                default: type = TraceEventType.Verbose; return false;
            }
        }

        // On fencelock's log thread, one record at a time.
        private static void OnRecord(IntPtr record, IntPtr userData)
        {
            CallbackThread.Enter();
            try
            {
                var native = (NativeMethods.NativeLogRecord)Marshal.PtrToStructure(record,
                    typeof(NativeMethods.NativeLogRecord));
                TraceEventType type;
                TryEventTypeOf(native.Level, out type); // a level from a later library: Verbose
                Source.TraceEvent(type, native.Level, Utf8.Decode(native.Line));
            }
            catch (Exception)
            {
                // Never unwind into native code: a listener that throws loses this record only.
            }
        }
    }
}
