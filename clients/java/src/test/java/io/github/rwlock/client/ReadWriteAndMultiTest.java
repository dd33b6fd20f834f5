package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.JedisPooled;

/** The read-write lock and the multi-lock. */
class ReadWriteAndMultiTest extends ServerTest {
    @Test
    void readersShareAndAWriterExcludesThem() throws Exception {
        DistributedReadWriteLock rw = new DistributedReadWriteLock(client, "t:rw");
        assertSame(rw.readLock(), rw.readLock());
        assertTrue(rw.readLock().tryLock());
        try (Client other = Client.create(jedis)) {
            DistributedReadWriteLock theirs = new DistributedReadWriteLock(other, "t:rw");
            assertTrue(theirs.readLock().tryLock(), "readers share");
            assertFalse(theirs.writeLock().tryLock(), "a writer waits for the readers");
            assertFalse(rw.writeLock().tryLock(), "a reader is never upgraded");
            assertEquals("read", server.call("HGET", "t:rw", "mode"));
            // A writer waiting is served by the last read unlock.
            CompletableFuture<Boolean> writer = CompletableFuture.supplyAsync(() -> {
                try {
                    boolean taken = theirs.writeLock().tryLock(5, 5, TimeUnit.SECONDS);
                    theirs.writeLock().unlock();
                    return taken;
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            theirs.readLock().unlock();
            RedisServer.waitUntil("the writer's wait", 5000, () -> "1".equals(server.info("clients", "blocked_clients")));
            rw.readLock().unlock();
            assertTrue(writer.get(10, TimeUnit.SECONDS));
        }
        assertEquals(0L, server.call("EXISTS", "t:rw"));
    }

    @Test
    void theWriterMayAlsoReadAndDowngrade() throws Exception {
        DistributedReadWriteLock rw = new DistributedReadWriteLock(client, "t:down", LockOptions.defaults().withFenced(true));
        rw.writeLock().lock();
        Long token = rw.writeLock().getToken();
        assertTrue(token != null && token > 0);
        rw.readLock().lock();
        assertNull(rw.readLock().getToken(), "the read side takes no tokens");
        rw.writeLock().unlock();
        assertEquals("read", server.call("HGET", "t:down", "mode"));
        assertTrue(rw.readLock().isHeldByCurrentThread());
        rw.readLock().unlock();
        assertEquals(0L, server.call("EXISTS", "t:down"));
        assertThrows(NotHeldException.class, () -> rw.writeLock().unlock());
        assertThrows(IllegalArgumentException.class,
                () -> new DistributedReadWriteLock(client, "t:x", LockOptions.defaults().withReentrant(false)));
    }

    @Test
    void theReadWatchdogRenewsAndForceUnlockIsReported() throws Exception {
        List<String> lost = new CopyOnWriteArrayList<>();
        try (Client dogged = Client.builder(jedis).watchdogTimeout(Duration.ofSeconds(1)).build()) {
            DistributedReadWriteLock rw = new DistributedReadWriteLock(dogged, "t:rwdog", LockOptions.defaults().withOnLost((n, o) -> lost.add(n)));
            rw.readLock().lock();
            Thread.sleep(1500);
            assertTrue(server.calls("rwlock.renew") >= 2);
            // Renewed and still leased (how much of the 1 s is left depends on when the last
            // renewal ran, late on a loaded machine).
            assertTrue((Long) server.call("PTTL", "t:rwdog") > 0);
            assertTrue(rw.forceUnlock());
            RedisServer.waitUntil("the loss", 10_000, () -> !lost.isEmpty());
            assertTrue(rw.readLock().isLost());
            assertThrows(NotHeldException.class, () -> rw.readLock().unlock());
        }
    }

    @Test
    void aMultiLockTakesAllOrNone() throws Exception {
        MultiLock multi = new MultiLock(client, List.of(Hold.lock("t:m1"), Hold.write("t:m2"), Hold.read("t:m3")));
        server.call("RWLOCK.READ", "t:m2", "other:1", "10000");
        assertFalse(multi.tryLock());
        assertEquals(0L, server.call("EXISTS", "t:m1"), "none taken");
        // Waiting holds none, and gets all at the release.
        CompletableFuture<Boolean> waiter = CompletableFuture.supplyAsync(() -> {
            try {
                boolean taken = multi.tryLock(5, TimeUnit.SECONDS);
                assertEquals("1", server.call("HGET", "t:m1", multi.getOwner()));
                multi.unlock();
                return taken;
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        RedisServer.waitUntil("the wait", 5000, () -> "1".equals(server.info("clients", "blocked_clients")));
        assertEquals(0L, server.call("EXISTS", "t:m1"));
        server.call("RWLOCK.UNLOCK", "t:m2", "other:1", "READ");
        assertTrue(waiter.get(10, TimeUnit.SECONDS));
        assertEquals(0L, server.call("EXISTS", "t:m1", "t:m2", "t:m3"));

        server.call("CONFIG", "RESETSTAT");
        multi.lock(5, TimeUnit.SECONDS);
        assertEquals(1, server.calls("lock.acquireall"));
        assertEquals("write", server.call("HGET", "t:m2", "mode"));
        assertEquals("read", server.call("HGET", "t:m3", "mode"));
        multi.unlock();
        assertEquals(1, server.calls("lock.unlockall"));
        assertEquals(0L, server.call("EXISTS", "t:m1", "t:m2", "t:m3"));
        assertThrows(NotHeldException.class, multi::unlock);
    }

    @Test
    void aMultiLockOfLockObjectsIsRenewedTogetherAndLostWhole() throws Exception {
        List<String> lost = new CopyOnWriteArrayList<>();
        try (Client dogged = Client.builder(jedis).watchdogTimeout(Duration.ofSeconds(1)).build()) {
            MultiLock multi = new MultiLock(dogged, List.of(Hold.lock("t:a"), Hold.lock("t:b")),
                    LockOptions.defaults().withOnLost((n, o) -> lost.add(n)));
            multi.lock();
            Thread.sleep(1500);
            assertTrue(server.calls("lock.renewall") >= 2);
            assertEquals(1L, server.call("LOCK.FORCEUNLOCK", "t:b"));
            RedisServer.waitUntil("the loss", 10_000, () -> !lost.isEmpty());
            assertEquals(List.of("t:a"), lost);
            assertThrows(NotHeldException.class, multi::unlock);
            assertEquals(0L, server.call("EXISTS", "t:a"), "the holds still held were released");
        }
        MultiLock of = MultiLock.of(client, new PlainLock(client, "t:x"), new DistributedReadWriteLock(client, "t:y").writeLock());
        assertEquals(List.of(Hold.lock("t:x"), Hold.write("t:y")), of.getHolds());
        assertThrows(IllegalArgumentException.class, () -> new MultiLock(client, List.of()));
        assertThrows(IllegalArgumentException.class, () -> MultiLock.of(client, of));
        assertThrows(IllegalArgumentException.class,
                () -> new MultiLock(client, List.of(Hold.lock("t:x")), LockOptions.defaults().withFenced(true)));
    }

    @Test
    void aJedisPoolWorksToo() throws Exception {
        try (JedisPool pool = new JedisPool(server.hostAndPort().getHost(), server.port);
                Client pooled = Client.create(pool)) {
            PlainLock lock = new PlainLock(pooled, "t:pool");
            assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
            assertEquals("1", server.call("HGET", "t:pool", lock.getOwner()));
            lock.unlock();
            assertEquals(0L, server.call("EXISTS", "t:pool"));
        }
    }

    @Test
    void aResp3PoolWorksToo() throws Exception {
        try (JedisPooled resp3 = new JedisPooled(server.hostAndPort(),
                redis.clients.jedis.DefaultJedisClientConfig.builder().resp3().build());
                Client client3 = Client.create(resp3)) {
            PlainLock fenced = PlainLock.fenced(client3, "t:resp3");
            assertTrue(fenced.tryLock(1, TimeUnit.SECONDS));
            assertTrue(fenced.getToken() > 0);
            assertFalse(inOtherThread(fenced));
            fenced.unlock();
            MultiLock multi = new MultiLock(client3, List.of(Hold.lock("t:r3a"), Hold.read("t:r3b")));
            assertTrue(multi.tryLock());
            multi.unlock();
            assertThrows(NotHeldException.class, multi::unlock);
            assertEquals(0L, server.call("EXISTS", "t:resp3", "t:r3a", "t:r3b"));
        }
    }

    private static boolean inOtherThread(PlainLock lock) throws Exception {
        return CompletableFuture.supplyAsync(lock::tryLock).get(10, TimeUnit.SECONDS);
    }
}
