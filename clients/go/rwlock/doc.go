// Package rwlock is the Go client of the rwlock Redis module: Redisson's
// distributed locks (RLock, RFencedLock, the non-reentrant lock, RFairLock,
// RReadWriteLock, RedissonMultiLock and RedissonRedLock) and synchronizers
// (RSemaphore: [Semaphore]; RPermitExpirableSemaphore:
// [PermitExpirableSemaphore]; RCountDownLatch: [CountDownLatch]) served
// natively by the module's LOCK.*, FAIRLOCK.*, RWLOCK.*, SEMAPHORE.*,
// PERMIT.* and LATCH.* commands, on go-redis (github.com/redis/go-redis/v9), standalone
// or Redis Cluster.
//
// A Go service on this package and a Java service on Redisson share the same
// locks: the keys, the owners' format (<client UUID>:<id>), the lease and the
// watchdog are Redisson's.
//
// # Owners
//
// Go has no thread identity, so the owner is per lock handle: every handle
// made by [Client.Lock], [Client.ReadWriteLock] or [Client.MultiLock] gets
// its own id, and re-entry is per handle (acquiring the same handle twice
// takes two holds, each released by one [Lock.Release]). The read and write
// sides of one [ReadWriteLock] share one owner, so the writer may also read
// (downgrade). The UUID is one per [Client] (random v4, or
// [WithClientID]); never reuse a Redisson instance's UUID.
//
// # Waiting
//
// A wait happens on the server (BLOCK), never by polling, on a connection of
// its own whose read timeout covers the wait plus a margin, so a wait longer
// than the go-redis client's ReadTimeout works. Cancelling the
// context.Context ends the server-side wait (CLIENT UNBLOCK from another
// connection) and the call returns the context's error holding nothing.
//
// # Lost replies
//
// Every single-lock acquisition and release sends HELD n, the handle's
// count of that kind of hold before it. When its reply is lost (the
// connection failed or the reply's deadline passed, not the context
// ending) it is resent once, on a new connection, the same command (an
// acquisition with what is left of its wait): the server answers a resent
// grant, or a resent release of a re-entered hold, as it answered the
// first send (a fenced lock: the current token) and changes nothing, so no
// hold is counted twice or left behind unknown. A last hold's release is
// never replayed (so it sends no HELD 1): its resend finding nothing held
// is [ErrReleaseUnknown] (the first send freed it, or it was gone before). A session's
// acquisitions and releases send no HELD: an acquisition's resend
// re-enters, and the hold the closed connection took is given back with it. A handle's acquisitions and
// releases therefore run one at a time.
//
// # Leases and the watchdog
//
// With [WithLease] the hold ends with its lease. Without one the hold gets
// the client's watchdog timeout (30 s, Redisson's lockWatchdogTimeout) and
// a timer renews it every third of it (no goroutine waits meanwhile); a
// renewal answering 0 (the lock was forced open, or the lease ran out)
// marks the lock lost: [Lock.Lost] turns true, [Lock.Done] is closed, the
// [WithOnLost] callback runs and [Lock.Release] returns [ErrNotHeld].
package rwlock
