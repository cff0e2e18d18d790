// Interop worker (JVM front, Java): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
// FENCELOCK_INTEROP_TAKE (see worker.py) says what it takes instead: `elect`
// campaigns (announcing "jvm", also FENCELOCK_INTEROP_ELECT=1) and logs its
// epoch, `permits:K` a permit (logged as a fifth field, the counter untouched),
// `rw` reads (even iterations, `r`) and writes (odd, `w`).
// FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not empty), is the per-node timeout
// in milliseconds (anything else fails the worker).
//   java -cp JAR:DEPS Worker.java NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
import dev.fencelock.Client;
import dev.fencelock.Leadership;
import dev.fencelock.Lock;
import dev.fencelock.RwLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.time.Instant;
import java.util.Arrays;

public class Worker {
    // Wall-clock nanoseconds, comparable across processes on one machine.
    static long nowNs() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000_000L + now.getNano();
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: java Worker.java NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE");
            System.exit(2);
        }
        String resource = args[1];
        int iterations = Integer.parseInt(args[2]);
        Path counter = Path.of(args[3]), log = Path.of(args[4]);
        String mode = System.getenv().getOrDefault("FENCELOCK_INTEROP_TAKE", "lock");
        if ("1".equals(System.getenv("FENCELOCK_INTEROP_ELECT"))) mode = "elect";
        Duration ttl = Duration.ofSeconds(10), wait = Duration.ofSeconds(120);
        Client.Builder builder = Client.builder().nodes(Arrays.asList(args[0].split(",")));
        String timeoutMs = System.getenv("FENCELOCK_INTEROP_NODE_TIMEOUT_MS");
        if (timeoutMs != null && !timeoutMs.isEmpty()) builder.nodeTimeout(Duration.ofMillis(Long.parseLong(timeoutMs)));
        try (Client client = builder.build()) {
            for (int i = 0; i < iterations; i++) {
                AutoCloseable held;
                long token;
                boolean writes = true;
                String extra = "";
                if (mode.equals("elect")) {
                    Leadership leadership = client.campaignAsync(resource, ttl, wait, "jvm".getBytes(StandardCharsets.UTF_8)).join();
                    held = leadership;
                    token = leadership.getEpoch();
                } else {
                    Lock lock;
                    if (mode.startsWith("permits:")) {
                        lock = client.semaphore(resource, Integer.parseInt(mode.substring(8))).acquireBlocking(ttl, wait);
                        writes = false;
                        extra = " " + lock.getPermit();
                    } else if (mode.equals("rw")) {
                        RwLock rw = client.rwLock(resource);
                        writes = i % 2 == 1;
                        lock = writes ? rw.acquireWriteBlocking(ttl, wait) : rw.acquireReadBlocking(ttl, wait);
                        extra = writes ? " w" : " r";
                    } else {
                        lock = client.acquireBlocking(resource, ttl, wait);
                    }
                    held = lock;
                    token = lock.getFencingToken();
                }
                long start = nowNs();
                String text = Files.readString(counter).trim();
                long value = text.isEmpty() ? 0 : Long.parseLong(text);
                Thread.sleep(3); // widen the window a lost update needs
                if (writes) Files.writeString(counter, (value + 1) + "\n");
                Files.writeString(log, "jvm " + token + " " + start + " " + nowNs() + extra + "\n",
                        StandardOpenOption.APPEND);
                held.close(); // releases (resigns)
            }
        } catch (Exception e) {
            System.err.println("jvm worker: " + e.getMessage());
            System.exit(1);
        }
    }
}
