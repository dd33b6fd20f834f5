package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.Test;

/** The README's quick start, compiled and run as written (but the port) against a server. */
class QuickStartTest {
    @Test
    void theReadmesQuickStartRuns() throws Exception {
        String readme = Files.readString(Paths.get("README.md"));
        int section = readme.indexOf("## Quick start");
        int start = readme.indexOf("```java\n", section) + "```java\n".length();
        String source = readme.substring(start, readme.indexOf("```", start));
        assertTrue(source.contains("public class QuickStart"), source);
        Path dir = Files.createTempDirectory("rwlock-quickstart-");
        try (RedisServer server = new RedisServer()) {
            Files.writeString(dir.resolve("QuickStart.java"), source.replace("6399", Integer.toString(server.port)));
            String classpath = System.getProperty("java.class.path");
            JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
            int compiled = javac.run(null, null, null, "-Xlint:all", "-Werror", "-cp", classpath, "-d", dir.toString(),
                    dir.resolve("QuickStart.java").toString());
            assertEquals(0, compiled, "javac QuickStart.java");
            Path java = Paths.get(System.getProperty("java.home"), "bin", "java");
            Process run = new ProcessBuilder(java.toString(), "-cp", dir + File.pathSeparator + classpath, "QuickStart")
                    .redirectErrorStream(true).start();
            assertTrue(run.waitFor(60, TimeUnit.SECONDS), "QuickStart ran too long");
            String output = new String(run.getInputStream().readAllBytes());
            assertEquals(0, run.exitValue(), output);
            List<String> lines = output.lines().filter(l -> !l.startsWith("SLF4J")).toList();
            assertEquals(3, lines.size(), output);
            assertTrue(lines.get(0).matches("holding invoice:42 as [0-9a-f-]{36}:\\d+"), output);
            assertEquals("reading orders", lines.get(1));
            assertTrue(lines.get(2).matches("fencing token [1-9]\\d*"), output);
            assertEquals(0L, server.call("EXISTS", "invoice:42", "orders", "ledger"), "everything released");
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
            }
        }
    }
}
