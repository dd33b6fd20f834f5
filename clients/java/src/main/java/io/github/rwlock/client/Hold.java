package io.github.rwlock.client;

import java.util.Objects;

/**
 * One hold of a {@link MultiLock}: a kind and a lock name.
 *
 * @param kind what is taken of the name
 * @param name the lock's name (its key)
 */
public record Hold(HoldKind kind, String name) {
    /**
     * Checks both parts.
     *
     * @param kind what is taken of the name
     * @param name the lock's name, not empty
     */
    public Hold {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(name, "name");
        if (name.isEmpty()) {
            throw new IllegalArgumentException("a lock name cannot be empty");
        }
    }

    /**
     * The plain lock {@code name}.
     *
     * @param name the lock's name
     * @return the hold
     */
    public static Hold lock(String name) {
        return new Hold(HoldKind.LOCK, name);
    }

    /**
     * A read hold of the read-write lock {@code name}.
     *
     * @param name the lock's name
     * @return the hold
     */
    public static Hold read(String name) {
        return new Hold(HoldKind.READ, name);
    }

    /**
     * The write hold of the read-write lock {@code name}.
     *
     * @param name the lock's name
     * @return the hold
     */
    public static Hold write(String name) {
        return new Hold(HoldKind.WRITE, name);
    }
}
