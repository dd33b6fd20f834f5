package io.github.rwlock.client;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import redis.clients.jedis.HostAndPort;

/**
 * A TCP proxy on 127.0.0.1 in front of a server that loses one reply: armed, it forwards the first
 * command named in {@code commands} to the server, lets the server answer it, and then closes both
 * sides of that connection instead of passing the answer on (the replies before it pass). Every
 * later connection and command is forwarded as it is. It parses RESP just enough to count commands
 * and replies (pipelined ones, such as {@code CLIENT ID} sent with a wait, keep their order), and
 * records every command of those names it saw, the lost one first.
 */
final class FaultProxy implements AutoCloseable {
    private final HostAndPort target;
    private final ServerSocket listener;
    private final Set<String> commands;
    private final AtomicBoolean armed = new AtomicBoolean();
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private final List<List<String>> seen = new CopyOnWriteArrayList<>();
    private volatile boolean dropped;
    private volatile boolean swallow;
    private volatile boolean closed;

    /** A proxy to {@code target} that loses the reply of the first of {@code commands} once armed. */
    FaultProxy(HostAndPort target, Set<String> commands) throws IOException {
        this.target = target;
        this.commands = commands;
        this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread accept = new Thread(this::accept, "fault-proxy-accept");
        accept.setDaemon(true);
        accept.start();
    }

    /** Where clients connect. */
    HostAndPort hostAndPort() {
        return new HostAndPort("127.0.0.1", listener.getLocalPort());
    }

    /** Loses the next matching command's reply by closing its connection (both sides). */
    void arm() {
        dropped = false;
        swallow = false;
        armed.set(true);
    }

    /**
     * Loses the next matching command's reply by never passing it (or anything after it) on, the
     * connection left open: the client's read times out, and the server keeps the connection
     * until the client closes its side.
     */
    void armSwallow() {
        dropped = false;
        swallow = true;
        armed.set(true);
    }

    /** Whether a reply was lost since {@link #arm()}. */
    boolean dropped() {
        return dropped;
    }

    /** The matching commands seen, in order. */
    List<List<String>> seen() {
        return Collections.unmodifiableList(new ArrayList<>(seen));
    }

    private void accept() {
        while (!closed) {
            try {
                Socket client = listener.accept();
                Socket server = new Socket(target.getHost(), target.getPort());
                client.setTcpNoDelay(true);
                server.setTcpNoDelay(true);
                sockets.add(client);
                sockets.add(server);
                new Pair(client, server).start();
            } catch (IOException e) {
                return; // closed
            }
        }
    }

    /** One proxied connection: its commands' count, and the index whose reply is to be lost. */
    private final class Pair {
        private final Socket client;
        private final Socket server;
        private final Object lock = new Object();
        private long commandsSent;
        private long repliesSeen;
        private long loseAt = -1;
        private boolean mute;

        Pair(Socket client, Socket server) {
            this.client = client;
            this.server = server;
        }

        void start() {
            Thread up = new Thread(this::up, "fault-proxy-up");
            Thread down = new Thread(this::down, "fault-proxy-down");
            up.setDaemon(true);
            down.setDaemon(true);
            up.start();
            down.start();
        }

        /** Client to server: whole commands, each counted, the one to lose marked. */
        private void up() {
            Buffer buffer = new Buffer();
            try (InputStream in = client.getInputStream(); OutputStream out = server.getOutputStream()) {
                byte[] chunk = new byte[8192];
                int n;
                while ((n = in.read(chunk)) >= 0) {
                    buffer.add(chunk, n);
                    int end;
                    while ((end = Resp.end(buffer.bytes(), 0, buffer.size())) > 0) {
                        List<String> command = Resp.command(buffer.bytes(), end);
                        synchronized (lock) {
                            if (!command.isEmpty() && commands.contains(command.get(0).toUpperCase(java.util.Locale.ROOT))) {
                                seen.add(command);
                                if (armed.compareAndSet(true, false)) {
                                    loseAt = commandsSent;
                                }
                            }
                            commandsSent++;
                        }
                        out.write(buffer.bytes(), 0, end);
                        buffer.drop(end);
                    }
                    out.flush();
                }
            } catch (IOException e) {
                // Either side closed.
            } finally {
                closeBoth();
            }
        }

        /** Server to client: whole replies, passed on until the one to lose, which closes both sides. */
        private void down() {
            Buffer buffer = new Buffer();
            try (InputStream in = server.getInputStream(); OutputStream out = client.getOutputStream()) {
                byte[] chunk = new byte[8192];
                int n;
                while ((n = in.read(chunk)) >= 0) {
                    buffer.add(chunk, n);
                    int end;
                    while ((end = Resp.end(buffer.bytes(), 0, buffer.size())) > 0) {
                        synchronized (lock) {
                            if (repliesSeen == loseAt) {
                                dropped = true;
                                if (!swallow) {
                                    closeBoth();
                                    return;
                                }
                                mute = true;
                            }
                            repliesSeen++;
                        }
                        if (!mute) {
                            out.write(buffer.bytes(), 0, end);
                        }
                        buffer.drop(end);
                    }
                    out.flush();
                }
            } catch (IOException e) {
                // Either side closed.
            } finally {
                closeBoth();
            }
        }

        private void closeBoth() {
            quietly(client);
            quietly(server);
        }
    }

    private static void quietly(Socket socket) {
        try {
            socket.close();
        } catch (IOException ignored) {
            // Already closed.
        }
    }

    @Override
    public void close() {
        closed = true;
        try {
            listener.close();
        } catch (IOException ignored) {
            // Already closed.
        }
        for (Socket socket : sockets) {
            quietly(socket);
        }
    }

    /** A growable byte buffer. */
    private static final class Buffer {
        private final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        private byte[] view = new byte[0];

        void add(byte[] chunk, int n) {
            bytes.write(chunk, 0, n);
            view = bytes.toByteArray();
        }

        byte[] bytes() {
            return view;
        }

        int size() {
            return view.length;
        }

        void drop(int n) {
            byte[] rest = java.util.Arrays.copyOfRange(view, n, view.length);
            bytes.reset();
            bytes.write(rest, 0, rest.length);
            view = rest;
        }
    }

    /** Just enough RESP (2 and 3) to find where one whole value ends. */
    static final class Resp {
        private Resp() {}

        /** The end (exclusive) of the value starting at {@code at}, or -1 when it is not all there. */
        static int end(byte[] b, int at, int size) {
            if (at >= size) {
                return -1;
            }
            int line = lineEnd(b, at, size);
            if (line < 0) {
                return -1;
            }
            char type = (char) b[at];
            String head = new String(b, at + 1, line - at - 1, StandardCharsets.US_ASCII);
            int next = line + 2;
            switch (type) {
                case '+', '-', ':', '_', ',', '#', '(' -> {
                    return next;
                }
                case '$', '!', '=' -> {
                    long len = Long.parseLong(head);
                    if (len < 0) {
                        return next;
                    }
                    long stop = next + len + 2;
                    return stop <= size ? (int) stop : -1;
                }
                case '*', '~', '>', '%', '|' -> {
                    long count = Long.parseLong(head);
                    if (type == '%' || type == '|') {
                        count *= 2;
                    }
                    int pos = next;
                    for (long i = 0; i < count; i++) {
                        pos = end(b, pos, size);
                        if (pos < 0) {
                            return -1;
                        }
                    }
                    return pos;
                }
                default -> throw new IllegalStateException("not RESP: " + type);
            }
        }

        private static int lineEnd(byte[] b, int from, int size) {
            for (int i = from; i + 1 < size; i++) {
                if (b[i] == '\r' && b[i + 1] == '\n') {
                    return i;
                }
            }
            return -1;
        }

        /** The bulk strings of a whole command (an array) ending at {@code end}. */
        static List<String> command(byte[] b, int end) {
            List<String> words = new ArrayList<>();
            if (b[0] != '*') {
                return words;
            }
            int line = lineEnd(b, 0, end);
            int count = Integer.parseInt(new String(b, 1, line - 1, StandardCharsets.US_ASCII));
            int pos = line + 2;
            for (int i = 0; i < count; i++) {
                int l = lineEnd(b, pos, end);
                int len = Integer.parseInt(new String(b, pos + 1, l - pos - 1, StandardCharsets.US_ASCII));
                words.add(new String(b, l + 2, len, StandardCharsets.UTF_8));
                pos = l + 2 + len + 2;
            }
            return words;
        }
    }
}
