/**
 * Redisson's distributed locks on the rwlock Redis module's commands, over Jedis: {@link
 * io.github.rwlock.client.PlainLock} (plain, fenced, non-reentrant), {@link
 * io.github.rwlock.client.FairLock} (one line with Redisson's {@code RFairLock} waiters) and {@link
 * io.github.rwlock.client.DistributedReadWriteLock} as {@code java.util.concurrent.locks}, {@link
 * io.github.rwlock.client.MultiLock} (one {@code LOCK.ACQUIREALL}) and {@link
 * io.github.rwlock.client.RedLock}; Redisson's semaphore, permit-expirable semaphore and
 * count-down latch as {@link io.github.rwlock.client.DistributedSemaphore} ({@code
 * java.util.concurrent.Semaphore}'s methods), {@link
 * io.github.rwlock.client.DistributedPermitExpirableSemaphore} (permits with ids and leases) and
 * {@link io.github.rwlock.client.DistributedCountDownLatch} ({@code CountDownLatch}'s); all made
 * from a {@link io.github.rwlock.client.Client}.
 *
 * <p>Waits happen on the server ({@code BLOCK}) on a connection of their own; an interrupt ends
 * them there. Holds taken without a lease are renewed by a watchdog; owners are Redisson's {@code
 * <client UUID>:<thread id>}, so a Redisson service and this client share the same locks.
 */
package io.github.rwlock.client;
