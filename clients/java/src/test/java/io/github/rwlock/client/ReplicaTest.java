package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;

/** Replica acknowledgement: WAIT after every acquisition, NotSynced when a replica is frozen. */
class ReplicaTest {
    @Test
    void anAcquisitionWaitsForTheReplicaAndFailsWhenItIsFrozen() throws Exception {
        // The master writes an AOF: WAITAOF where the server has it (7.2+), WAIT alone before.
        try (RedisServer master = new RedisServer("--appendonly", "yes");
                RedisServer replica = new RedisServer("--replicaof", "127.0.0.1", Integer.toString(master.port));
                JedisPooled jedis = master.pooled();
                Client client = Client.create(jedis)) {
            RedisServer.waitUntil("the replica", 15_000, () -> "1".equals(master.info("replication", "connected_slaves"))
                    && "up".equals(replica.info("replication", "master_link_status")) && master.acknowledged());
            master.call("CONFIG", "RESETSTAT");
            PlainLock lock = new PlainLock(client, "s:lock");
            assertTrue(lock.tryLock());
            assertEquals(1, master.calls("wait"));
            RedisServer.waitUntil("the copy", 2000, () -> replica.call("HGET", "s:lock", lock.getOwner()) != null);
            lock.unlock();

            replica.signal("STOP");
            try {
                long start = System.nanoTime();
                NotSyncedException e = assertThrows(NotSyncedException.class, () -> lock.tryLock(1, TimeUnit.SECONDS));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(ms >= 900 && ms < 4000, "waited " + ms);
                assertTrue(e.getMessage().contains("WAIT"), e.getMessage());
                assertEquals(0L, master.call("EXISTS", "s:lock"), "released again");
                assertFalse(lock.isHeldByCurrentThread());

                try (Client unsynced = Client.builder(jedis).replicaSync(ReplicaSync.DISABLED).build()) {
                    PlainLock quick = new PlainLock(unsynced, "s:lock");
                    assertTrue(quick.tryLock());
                    quick.unlock();
                }
                try (Client shortSync = Client.builder(jedis)
                        .replicaSync(new ReplicaSync(true, Duration.ofMillis(200), true)).build()) {
                    long begin = System.nanoTime();
                    assertThrows(NotSyncedException.class, () -> new PlainLock(shortSync, "s:other").lock());
                    assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - begin) < 2000);
                }
            } finally {
                replica.signal("CONT");
            }
        }
    }
}
