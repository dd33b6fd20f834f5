package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * These tests compile our Java client's sources (clients/java/src/main/java) with their own
 * dependencies: the client must get the Jedis it is built and tested with in clients/java.
 */
class JavaClientBuildTest {
    @Test
    void theClientsJedisVersionIsTheOneItIsBuiltWith() throws Exception {
        Path clientPom = Paths.get(System.getProperty("user.dir")).resolve("../../clients/java/pom.xml").normalize();
        Matcher version = Pattern.compile("<jedis\\.version>([^<]+)</jedis\\.version>").matcher(Files.readString(clientPom));
        assertTrue(version.find(), "no jedis.version in " + clientPom);
        String here = System.getProperty("rwlock.jedis.version");
        assertNotNull(here, "Surefire passes rwlock.jedis.version");
        assertEquals(version.group(1), here, "tests/redisson/pom.xml's jedis.version must be " + clientPom + "'s");
    }
}
