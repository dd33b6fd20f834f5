package io.github.rwlock.client;

import java.util.List;

/**
 * Redisson's {@code RReadWriteLock} on the module's {@code RWLOCK.*} commands: any number of
 * readers while nobody writes, or one writer.
 *
 * <p>An owner ({@code <client UUID>:<thread id>}) re-enters its own holds: read in read, write in
 * write, read while writing (releasing the write then leaves a reader: a downgrade). A reader
 * cannot upgrade: release the read first. A fenced one ({@link LockOptions#withFenced}) makes the
 * write side take a fencing token on each acquisition.
 *
 * <pre>{@code
 * DistributedReadWriteLock rw = new DistributedReadWriteLock(client, "orders");
 * rw.readLock().lock();
 * try {
 *     ...
 * } finally {
 *     rw.readLock().unlock();
 * }
 * }</pre>
 */
public final class DistributedReadWriteLock implements java.util.concurrent.locks.ReadWriteLock {
    private final Client client;
    private final String name;
    private final ReadLock read;
    private final WriteLock write;

    /**
     * The read-write lock {@code name}.
     *
     * @param client the client
     * @param name the lock's name (its key)
     */
    public DistributedReadWriteLock(Client client, String name) {
        this(client, name, LockOptions.defaults());
    }

    /**
     * The read-write lock {@code name} with options (fenced write side, session, loss listener).
     *
     * @param client the client
     * @param name the lock's name (its key)
     * @param options how both sides take their holds; never non-reentrant
     */
    public DistributedReadWriteLock(Client client, String name, LockOptions options) {
        if (!options.reentrant()) {
            throw new IllegalArgumentException("a read-write lock is always re-entrant");
        }
        this.client = client;
        this.name = DistributedLock.checkName(name);
        this.read = new ReadLock(client, name, options);
        this.write = new WriteLock(client, name, options);
    }

    /**
     * The read side.
     *
     * @return the read lock (the same object every time)
     */
    @Override
    public ReadLock readLock() {
        return read;
    }

    /**
     * The write side.
     *
     * @return the write lock (the same object every time)
     */
    @Override
    public WriteLock writeLock() {
        return write;
    }

    /**
     * The lock's name.
     *
     * @return the key
     */
    public String getName() {
        return name;
    }

    /**
     * Deletes the lock (both modes) whoever holds it ({@code RWLOCK.FORCEUNLOCK}).
     *
     * @return whether there was something to delete
     */
    public boolean forceUnlock() {
        Link link = client.connector().open(name);
        try {
            return Plan.integer(link.call(List.of("RWLOCK.FORCEUNLOCK", name), Link.DEFAULT)) == 1;
        } finally {
            link.close();
        }
    }

    /** The read side of a {@link DistributedReadWriteLock}: shared by any number of owners while nobody writes. */
    public static final class ReadLock extends DistributedLock {
        ReadLock(Client client, String name, LockOptions options) {
            super(client, Plan.single(Hold.read(name), false, true), options);
        }
    }

    /** The write side of a {@link DistributedReadWriteLock}: one owner, and no reader but that owner. */
    public static final class WriteLock extends DistributedLock {
        WriteLock(Client client, String name, LockOptions options) {
            super(client, Plan.single(Hold.write(name), options.fenced(), true), options);
        }
    }
}
