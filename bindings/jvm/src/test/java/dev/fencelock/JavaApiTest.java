package dev.fencelock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** The API as Java sees it: builders, try-with-resources, CompletableFutures, listeners, exceptions. */
class JavaApiTest {
    private static RedisNodes nodes;
    private static Client client;

    @BeforeAll
    static void start() {
        nodes = new RedisNodes(1);
        client = Client.builder().nodes(nodes.getUrls()).nodeTimeout(Duration.ofMillis(200)).build();
    }

    @AfterAll
    static void stop() {
        client.close();
        nodes.close();
    }

    private static String unique(String name) {
        return "java:" + name + ":" + UUID.randomUUID();
    }

    @Test
    void tryWithResourcesReleasesTheLock() {
        String resource = unique("twr");
        long token;
        try (Lock lock = client.acquireBlocking(resource, Duration.ofSeconds(5), Duration.ofSeconds(1))) {
            assertTrue(lock.isHeld());
            assertEquals(LockStatus.HELD, lock.getStatus());
            token = lock.getFencingToken();
            assertTrue(token > 0);
            assertNull(client.tryAcquireBlocking(resource, Duration.ofSeconds(5)), "held: one attempt gives null");
        }
        try (Lock again = client.tryAcquireBlocking(resource, Duration.ofSeconds(5))) {
            assertNotNull(again, "released by try-with-resources");
            assertTrue(again.getFencingToken() > token);
        }
    }

    @Test
    void completableFuturesAcquireAndFail() throws Exception {
        String resource = unique("future");
        CompletableFuture<Lock> first = client.acquireAsync(resource, Duration.ofSeconds(5));
        Lock lock = first.get(5, TimeUnit.SECONDS);
        LockOptions once = LockOptions.builder().ttl(Duration.ofSeconds(5)).waitFor(Duration.ZERO).build();
        ExecutionException refused = assertThrows(ExecutionException.class, () -> client.acquireAsync(resource, once).get());
        assertInstanceOf(NotAcquiredException.class, refused.getCause());
        assertEquals(ErrorKind.NOT_ACQUIRED, ((FenceLockException) refused.getCause()).getKind());
        CompletableFuture<Lock> waiting = client.acquireAsync(resource, Duration.ofSeconds(5), Duration.ofSeconds(5));
        String chained = lock.releaseAsync()
                .thenCompose(ignored -> waiting)
                .thenApply(next -> {
                    next.close();
                    return "token " + next.getFencingToken();
                })
                .get(5, TimeUnit.SECONDS);
        assertTrue(chained.startsWith("token "));
    }

    @Test
    void exceptionsAreCatchableByKind() {
        assertThrows(InvalidArgumentException.class, () -> client.acquireBlocking("", Duration.ofSeconds(1)));
        assertThrows(ConfigException.class, () -> new Client(List.of()));
        try {
            client.acquireBlocking("r", Duration.ZERO);
        } catch (FenceLockException e) {
            assertEquals(ErrorKind.INVALID_ARGUMENT, e.getKind());
            assertTrue(e.getMessage().contains("ttl"), e.getMessage());
        }
    }

    @Test
    void lostListenerAndFencedWrites() throws Exception {
        String resource = unique("lost");
        Lock lock = client.acquireBlocking(resource, Duration.ofMillis(600));
        CompletableFuture<LossReason> heard = new CompletableFuture<>();
        lock.onLost(heard::complete);
        String key = "java-data:" + UUID.randomUUID();
        client.fencedSetBlocking(key, "v1", lock.getFence());
        nodes.call(0, "DEL fencelock:{" + resource + "}");
        assertEquals(LossReason.DELETED, heard.get(3, TimeUnit.SECONDS));
        assertEquals(LossReason.DELETED, lock.getLost().get());
        assertFalse(lock.isHeld());
        assertThrows(NotHeldException.class, lock::close);
        try (Lock next = client.acquireBlocking(resource, Duration.ofSeconds(5))) {
            client.fencedSetBlocking(key, "v2", next.getFence());
            assertThrows(StaleTokenException.class, () -> client.fencedSetBlocking(key, "late", lock.getFence()));
            FencedValue stored = client.fencedGetBlocking(key);
            assertEquals(new FencedValue("v2", next.getFencingToken()), stored);
        }
    }

    @Test
    void semaphoreAndReadWriteLock() {
        Semaphore sem = client.semaphore(unique("sem"), 1);
        try (Lock permit = sem.acquireBlocking(Duration.ofSeconds(5))) {
            assertEquals(Integer.valueOf(0), permit.getPermit());
            assertNull(sem.tryAcquireBlocking(Duration.ofSeconds(5)));
        }
        RwLock rw = client.rwLock(unique("rw"));
        try (Lock r1 = rw.acquireReadBlocking(Duration.ofSeconds(5));
                Lock r2 = rw.acquireReadBlocking(Duration.ofSeconds(5))) {
            assertTrue(r1.isHeld() && r2.isHeld());
            assertNull(rw.tryAcquireWriteBlocking(Duration.ofSeconds(5)));
        }
        try (Lock w = rw.acquireWriteBlocking(Duration.ofSeconds(5), Duration.ofSeconds(1))) {
            assertTrue(w.isHeld());
        }
        Metrics metrics = client.metrics();
        assertTrue(metrics.getAcquired() >= 4);
    }
}
