package main

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every byte back, until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dialFrom(t *testing.T, src, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, src, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	readBack(t, c, msg)
}

func readBack(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	buf := make([]byte, len(msg))
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
		t.Fatalf("read back %q, %v; want %q", buf, err, msg)
	}
}

// blockFrom holds the connections from one source address (those open and
// those opened during the block) and no other, and unblockFrom delivers
// what it held: the cluster's repl-partition cuts a node's own links so.
func TestProxyBlockFrom(t *testing.T) {
	p, err := newProxy("test", echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	const cut = "127.0.1.201"
	before := dialFrom(t, cut, p.addr())
	roundTrip(t, before, "up")
	p.blockFrom(cut)
	other := dialFrom(t, "127.0.0.1", p.addr())
	during := dialFrom(t, cut, p.addr())
	for _, c := range []net.Conn{before, during} {
		if _, err := c.Write([]byte("held")); err != nil {
			t.Fatal(err)
		}
	}
	roundTrip(t, other, "free")
	// The cut connections' bytes have had the time the free one's round
	// trip took, and more: none may come back while the block holds.
	for _, c := range []net.Conn{before, during} {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		n, err := c.Read(make([]byte, 4))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("a cut connection read %d bytes, %v, during the block", n, err)
		}
	}
	p.unblockFrom()
	readBack(t, before, "held")
	readBack(t, during, "held")
	roundTrip(t, other, "still")
}
