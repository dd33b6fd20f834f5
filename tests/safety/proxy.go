package main

import (
	"net"
	"sync"
	"time"
)

// proxy is a fault-injecting TCP proxy in front of one server. Faults:
//   - delay: every chunk is delivered delay after it was read (in both
//     directions): a lagging link;
//   - block: nothing is delivered either way and nothing is lost (the
//     bytes wait, as TCP retransmits them), until unblock delivers them: a
//     partition that heals;
//   - dropAll: every connection is cut and the bytes not yet delivered are
//     lost, as the output buffer of a killed server is;
//   - blockFrom: as block, but only for the connections from one source
//     address (a cluster node's own, bind-source-addr): the node is cut
//     from this server while everyone else still reaches it.
type proxy struct {
	name   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	delay time.Duration
	open  chan struct{} // closed while not blocked
	// from is the source address blockFrom holds ("" when none), and
	// fromOpen the gate its connections wait at (closed while not held).
	from     string
	fromOpen chan struct{}
	conns    map[*pconn]struct{}
	done     bool
}

// pconn is one proxied connection: two directions, each a reader that
// queues chunks and a writer that delivers them when the faults allow.
type pconn struct {
	client, server net.Conn
	src            string // the client's source address
	abort          chan struct{}
	once           sync.Once
}

type chunk struct {
	data []byte
	at   time.Time
}

func newProxy(name, target string) (*proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	open := make(chan struct{})
	close(open)
	p := &proxy{name: name, target: target, ln: ln, open: open, conns: map[*pconn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *proxy) port() int    { return p.ln.Addr().(*net.TCPAddr).Port }
func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *proxy) handle(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		client.Close()
		return
	}
	src, _, _ := net.SplitHostPort(client.RemoteAddr().String())
	c := &pconn{client: client, server: server, src: src, abort: make(chan struct{})}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		c.cut()
		return
	}
	p.conns[c] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pump(c, client, server) }()
	go func() { defer wg.Done(); p.pump(c, server, client) }()
	wg.Wait()
	c.cut()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (c *pconn) cut() {
	c.once.Do(func() {
		close(c.abort)
		c.client.Close()
		c.server.Close()
	})
}

// pump copies src to dst through the faults. When src ends, what was read
// is still delivered (unless the connection is cut), then both ends close.
func (p *proxy) pump(c *pconn, src, dst net.Conn) {
	queue := make(chan chunk, 1024)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 32*1024)
			n, err := src.Read(buf)
			if n > 0 {
				select {
				case queue <- chunk{buf[:n], time.Now()}:
				case <-c.abort:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range queue {
		for {
			p.mu.Lock()
			gate, due := p.gate(c), ch.at.Add(p.delay)
			p.mu.Unlock()
			if gate != nil {
				// Blocked: wait, then look at every fault again.
				select {
				case <-gate:
				case <-c.abort:
					return
				}
				continue
			}
			wait := time.Until(due)
			if wait <= 0 {
				break
			}
			// The delay may change while waiting: look again after it.
			select {
			case <-time.After(wait):
			case <-c.abort:
				return
			}
		}
		if _, err := dst.Write(ch.data); err != nil {
			c.cut()
			return
		}
	}
	c.cut()
}

func (p *proxy) setDelay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// block holds every byte in both directions until unblock.
func (p *proxy) block() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
		p.open = make(chan struct{})
	default:
	}
}

func (p *proxy) unblock() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.open:
	default:
		close(p.open)
	}
}

// blockFrom holds every byte in both directions of the connections from
// source address src (and of those it opens later) until unblockFrom.
func (p *proxy) blockFrom(src string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.from, p.fromOpen = src, make(chan struct{})
}

func (p *proxy) unblockFrom() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fromOpen != nil {
		close(p.fromOpen)
		p.from, p.fromOpen = "", nil
	}
}

// gate is the channel c's bytes wait at while a block holds them, nil when
// none does (p.mu held).
func (p *proxy) gate(c *pconn) chan struct{} {
	select {
	case <-p.open:
	default:
		return p.open
	}
	if p.fromOpen != nil && c.src == p.from {
		return p.fromOpen
	}
	return nil
}

// dropAll cuts every connection, losing what it had not delivered.
func (p *proxy) dropAll() {
	p.mu.Lock()
	conns := make([]*pconn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.cut()
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	p.done = true
	p.mu.Unlock()
	p.ln.Close()
	p.unblock()
	p.unblockFrom()
	p.dropAll()
}
