package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * No circle among the package's files: each file names (outside comments and strings) only files
 * below it, as the module's tests/layering.rs requires of src/. A name qualified by a package
 * ({@code java.util.concurrent.locks.Lock}) is not this package's.
 */
class LayeringTest {
    private static final Path SOURCES = Paths.get("src/main/java/io/github/rwlock/client");

    static String code(String source) {
        // Comments, then string and char literals, out: javadoc names classes it does not use.
        String noBlock = source.replaceAll("(?s)/\\*.*?\\*/", " ");
        String noLine = noBlock.replaceAll("//[^\n]*", " ");
        return noLine.replaceAll("\"(\\\\.|[^\"\\\\])*\"", "\"\"").replaceAll("'(\\\\.|[^'\\\\])'", "''");
    }

    static Map<String, Set<String>> graph() throws IOException {
        Map<String, String> code = new TreeMap<>();
        try (Stream<Path> files = Files.list(SOURCES)) {
            for (Path file : (Iterable<Path>) files.filter(f -> f.toString().endsWith(".java"))::iterator) {
                code.put(file.getFileName().toString().replace(".java", ""), code(Files.readString(file)));
            }
        }
        Map<String, Set<String>> uses = new TreeMap<>();
        for (Map.Entry<String, String> file : code.entrySet()) {
            Set<String> names = new TreeSet<>();
            for (String other : code.keySet()) {
                if (other.equals(file.getKey())) {
                    continue;
                }
                Matcher m = Pattern.compile("(?<![.\\w])" + other + "\\b").matcher(file.getValue());
                if (m.find()) {
                    names.add(other);
                }
            }
            uses.put(file.getKey(), names);
        }
        return uses;
    }

    @Test
    void theFilesFormNoCircle() throws IOException {
        Map<String, Set<String>> uses = graph();
        assertTrue(uses.size() >= 15, "the sources: " + uses.keySet());
        assertTrue(uses.get("PlainLock").contains("DistributedLock"), "the scan sees uses: " + uses.get("PlainLock"));
        Map<String, Integer> state = new HashMap<>();
        List<String> path = new ArrayList<>();
        for (String file : uses.keySet()) {
            List<String> circle = visit(file, uses, state, path);
            assertEquals(List.of(), circle, "a circle among the files");
        }
    }

    /** Depth-first: 1 = on the path, 2 = done; returns a circle found, else an empty list. */
    private static List<String> visit(String file, Map<String, Set<String>> uses, Map<String, Integer> state,
            List<String> path) {
        Integer seen = state.get(file);
        if (seen != null && seen == 2) {
            return List.of();
        }
        if (seen != null && seen == 1) {
            List<String> circle = new ArrayList<>(path.subList(path.indexOf(file), path.size()));
            circle.add(file);
            return circle;
        }
        state.put(file, 1);
        path.add(file);
        for (String next : uses.get(file)) {
            List<String> circle = visit(next, uses, state, path);
            if (!circle.isEmpty()) {
                return circle;
            }
        }
        path.remove(path.size() - 1);
        state.put(file, 2);
        return List.of();
    }

    @Test
    void theScanFindsACircleWhenThereIsOne() {
        Map<String, Set<String>> uses = Map.of("A", Set.of("B"), "B", Set.of("C"), "C", Set.of("A"));
        assertEquals(List.of("A", "B", "C", "A"), visit("A", uses, new HashMap<>(), new ArrayList<>()));
        assertEquals("x   y \"\"", code("x /* Lock */ y \"Lock\""));
    }
}
