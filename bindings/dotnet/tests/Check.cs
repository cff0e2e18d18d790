using System;
using System.Runtime.CompilerServices;
using System.Threading.Tasks;

namespace FenceLock.Tests
{
    /// <summary>A failed check: the test stops and is reported as FAIL with this message.</summary>
    internal sealed class CheckFailedException : Exception
    {
        public CheckFailedException(string message) : base(message) { }
    }

    /// <summary>A test that cannot run here: reported as skip with this reason, neither passed nor failed.</summary>
    internal sealed class SkippedException : Exception
    {
        public SkippedException(string reason) : base(reason) { }
    }

    /// <summary>Assertions for the console test runner (no test framework: Debian's Mono has none).</summary>
    internal static class Check
    {
        /// <summary>Fails the test unless <paramref name="condition"/> holds.</summary>
        public static void That(bool condition, string what, [CallerLineNumber] int line = 0)
        {
            if (!condition) throw new CheckFailedException("line " + line + ": check failed: " + what);
        }

        /// <summary>Stops the test and reports it as skipped, saying why.</summary>
        public static void Skip(string reason)
        {
            throw new SkippedException(reason);
        }

        /// <summary>Fails unless <paramref name="actual"/> equals <paramref name="expected"/>.</summary>
        public static void Equal<T>(T expected, T actual, string what, [CallerLineNumber] int line = 0)
        {
            if (!Equals(expected, actual))
                throw new CheckFailedException("line " + line + ": " + what + ": expected " + expected + ", got " + actual);
        }

        /// <summary>
        /// Runs <paramref name="action"/>, which must throw <typeparamref name="T"/>
        /// (exactly that type unless <paramref name="orSubclass"/>) before returning.
        /// </summary>
        public static T ThrowsNow<T>(Action action, bool orSubclass = false, [CallerLineNumber] int line = 0)
            where T : Exception
        {
            try
            {
                action();
            }
            catch (Exception e)
            {
                return Expect<T>(e, orSubclass, line);
            }
            throw new CheckFailedException("line " + line + ": expected " + typeof(T).Name + ", nothing was thrown");
        }

        /// <summary>
        /// Awaits <paramref name="action"/>, which must throw <typeparamref name="T"/>
        /// either at once or through its task.
        /// </summary>
        public static async Task<T> Throws<T>(Func<Task> action, bool orSubclass = false,
            [CallerLineNumber] int line = 0) where T : Exception
        {
            try
            {
                await action();
            }
            catch (Exception e)
            {
                return Expect<T>(e, orSubclass, line);
            }
            throw new CheckFailedException("line " + line + ": expected " + typeof(T).Name + ", nothing was thrown");
        }

        /// <summary>Waits up to <paramref name="deadline"/> for <paramref name="task"/>; false if it did not finish.</summary>
        public static async Task<bool> Within(Task task, TimeSpan deadline)
        {
            return await Task.WhenAny(task, Task.Delay(deadline)) == task;
        }

        /// <summary>Polls <paramref name="condition"/> every 20 ms for up to <paramref name="deadline"/>.</summary>
        public static async Task<bool> Eventually(Func<bool> condition, TimeSpan deadline)
        {
            var until = DateTime.UtcNow + deadline;
            while (!condition())
            {
                if (DateTime.UtcNow > until) return false;
                await Task.Delay(20);
            }
            return true;
        }

        private static T Expect<T>(Exception e, bool orSubclass, int line) where T : Exception
        {
            var matches = orSubclass ? e is T : e.GetType() == typeof(T);
            if (!matches)
                throw new CheckFailedException("line " + line + ": expected " + typeof(T).Name + ", got " + e.GetType().Name + ": " + e.Message);
            return (T)e;
        }
    }
}
