package rwlock.redisson;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Reads of the module's introspection replies (LOCK.INFO, RWLOCK.INFO). */
final class Module {
    private Module() {
    }

    /** LOCK.INFO's holders: owner → hold count (empty when the lock is free). */
    static Map<String, Long> holders(Raw raw, String lock) {
        List<?> info = (List<?>) raw.call("LOCK.INFO", lock);
        Map<String, Long> out = new LinkedHashMap<>();
        List<?> holders = (List<?>) field(info, "holders");
        for (Object holder : holders) {
            List<?> h = (List<?>) holder;
            out.put((String) field(h, "owner"), (Long) field(h, "count"));
        }
        return out;
    }

    /** RWLOCK.INFO's mode: read, write or none. */
    static String mode(Raw raw, String lock) {
        return (String) field((List<?>) raw.call("RWLOCK.INFO", lock), "mode");
    }

    /** RWLOCK.INFO's owners: owner → [reads, writes]. */
    static Map<String, long[]> owners(Raw raw, String lock) {
        List<?> info = (List<?>) raw.call("RWLOCK.INFO", lock);
        Map<String, long[]> out = new LinkedHashMap<>();
        for (Object owner : (List<?>) field(info, "owners")) {
            List<?> o = (List<?>) owner;
            out.put((String) field(o, "owner"), new long[] {(Long) field(o, "reads"), (Long) field(o, "writes")});
        }
        return out;
    }

    /** The value after {@code name} in a flat name/value reply. */
    static Object field(List<?> flat, String name) {
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            if (name.equals(flat.get(i))) {
                return flat.get(i + 1);
            }
        }
        throw new AssertionError("no field " + name + " in " + flat);
    }
}
