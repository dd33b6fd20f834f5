package io.github.rwlock.client;

/** What a {@link MultiLock} takes of each name: the word {@code LOCK.ACQUIREALL} sends. */
public enum HoldKind {
    /** The plain lock ({@code LOCK.*}, Redisson's RLock). */
    LOCK,
    /** A read hold of a read-write lock ({@code RWLOCK.READ}). */
    READ,
    /** The write hold of a read-write lock ({@code RWLOCK.WRITE}). */
    WRITE
}
