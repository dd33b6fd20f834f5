package rwlock

// The one acquisition driver: a lock's hold, a semaphore's permits and a
// latch's wait for zero all go through it, so that they wait, resend a lost
// reply, follow a MOVED reply and check the replicas' acknowledgement the
// same way.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
)

// acquirer is what one kind's acquisition sends and how the driver treats
// it; the driver does the I/O.
type acquirer struct {
	// name is the key: it routes the command and names the errors.
	name string
	// args is the command for request r, with request id ("" sends none).
	args func(r request, id string) []any
	// read reads the command's reply.
	read func(reply any, r request) (outcome, error)
	// undo gives back what a grant took (its wait was cancelled, or the
	// replicas did not acknowledge it), on lk, the connection that took it.
	undo func(lk *link, r request) error
	// requested: every send carries REQUEST id ttl, so that the one resend
	// after a lost reply is answered from the server's latch.
	requested bool
	// counted: the command carries HELD, the owner's count before it (a
	// session's carries none: see singlePlan.acquire), and a lost reply is
	// resent as it is: the server answers a resend whose first send was
	// granted from the lock's hash, and a session's resend re-enters while
	// the first send's grant is given back with its connection.
	counted bool
	// readOnly: the command writes nothing (a latch's wait): no replica
	// sync, and a lost reply is resent as it is.
	readOnly bool
	// session: what is taken is bound to the connection, which the caller
	// keeps.
	session bool
	// abandon (nil: nothing) runs after a wait failed on I/O: the owner may
	// be left in a line the server still believes it waits in.
	abandon func(r request)
	// sessionLost (nil: nothing) runs when the session's own connection
	// broke, taking what was bound to it.
	sessionLost func()
	// unheard (nil: nothing) runs when no reply came for request id (the
	// connection failed with the resend's too, or a cancelled wait's grant
	// was lost with its killed connection: Redis 7.0 drops the reply of a
	// grant made in the turn of a CLIENT UNBLOCK): the server's latch of id
	// says whether it granted, and what it granted is given back. A lock
	// needs none: its hold ends at its lease.
	unheard func(id string) error
}

// acquire runs one acquisition of a on session (nil: a wait connection of
// its own): the master's INFO once, the command (with a fresh request id
// when a.requested) and the replica sync in one pipeline, waiting on the
// server as r says; a MOVED reply asked again of the new master, a lost
// reply resent once (the same command, what is left of the wait). A grant
// made as ctx ended, or not acknowledged, is undone. It returns the outcome, the connection when
// a.session keeps it (else nil), and the request id whose latch the next
// release deletes ("" none).
func (c *Client) acquire(ctx context.Context, a acquirer, r request, session *link) (o outcome, kept *link, latchID string, err error) {
	lk := session
	if lk == nil {
		if lk, err = c.openLink(ctx, a.name); err != nil {
			return outcome{}, nil, "", err
		}
	}
	keep := false
	defer func() {
		if lk != nil && lk != session && !keep {
			lk.close()
		}
	}()
	var m *learned
	if !a.readOnly {
		if m, err = c.learnedOf(ctx, lk); err != nil {
			return outcome{}, nil, "", err
		}
	}
	// A fresh request id per acquisition: its one resend below is answered
	// from the server's latch.
	id := ""
	if a.requested {
		id = uuid.NewString()
	}
	began := time.Now()
	p := c.acquisition(a.name, a.args(r, id), m, r, "")
	rs, cancelled := lk.wait(ctx, r.block, p.extra, p.cmds)
	if addr, moved := movedTo(rs[0].err); moved && cancelled == nil && session == nil {
		// The slot moved to another master (a reshard): ask that one.
		if lk, err = c.moved(ctx, lk, addr); err != nil {
			return outcome{}, nil, "", err
		}
		rs, cancelled = lk.wait(ctx, r.block, p.extra, p.cmds)
	}
	if ioError(rs[0].err) && cancelled == nil && ctx.Err() == nil && session == nil && (id != "" || a.readOnly || a.counted) {
		// The reply was lost (the connection failed or timed out): the
		// server may or may not have granted it. Once more, on a new
		// connection, the same command (request id or HELD) with what is
		// left of the wait: a grant is answered again instead of counted
		// twice.
		retry := r.remaining(time.Since(began))
		lk.close()
		if lk, err = c.openLink(ctx, a.name); err != nil {
			// No resend: the first send's fate stays unknown (below).
			rs = failedAll(p.cmds, errors.Join(rs[0].err, err))
		} else {
			p = c.acquisition(a.name, a.args(retry, id), m, retry, id)
			rs, cancelled = lk.wait(ctx, retry.block, p.extra, p.cmds)
		}
	}
	res := rs[0]
	if res.err != nil {
		var given error
		if ioError(res.err) {
			if session != nil && cancelled == nil && a.sessionLost != nil {
				a.sessionLost()
			}
			if a.abandon != nil {
				a.abandon(r)
			}
			if id != "" && a.unheard != nil {
				given = a.unheard(id)
			}
		}
		return outcome{}, nil, "", errors.Join(failure(a.name, res.err, cancelled), given)
	}
	detail, syncErr := c.checkSync(p, rs, m)
	if o, err = a.read(res.reply, r); err != nil {
		return outcome{}, nil, "", err
	}
	if cancelled != nil {
		if o.acquired { // served as the wait was cancelled: give it back
			return outcome{}, nil, "", errors.Join(cancelled, a.undo(lk, r))
		}
		return outcome{}, nil, "", cancelled
	}
	if !o.acquired {
		return o, nil, "", nil // what WAIT replied is of no interest: nothing was taken
	}
	if syncErr != nil || detail != "" {
		undoErr := a.undo(lk, r)
		if syncErr != nil {
			return outcome{}, nil, "", errors.Join(syncErr, undoErr)
		}
		return outcome{}, nil, "", errors.Join(newError(ErrNotSynced, a.name, detail+"; released again"), undoErr)
	}
	if a.session {
		// Bound to lk, which the caller keeps.
		keep = true
		return o, lk, "", nil
	}
	return o, nil, id, nil
}

// failure is the error of an acquisition that failed with err: the
// package's kind for what the server refused, ctx's error when the wait
// was cancelled, else err itself.
func failure(name string, err, cancelled error) error {
	if strings.HasPrefix(err.Error(), "NON_REENTRANT") {
		return newError(ErrNotReentrant, name, err.Error())
	}
	if strings.HasPrefix(err.Error(), "NOREPLICAS") {
		// The master's min-replicas-to-write refused it: nothing written.
		return newError(ErrNotSynced, name, "the master refused the write: "+err.Error())
	}
	if cancelled != nil {
		return cancelled
	}
	return err
}

// learnedOf is what the Client learned of lk's master for the replica
// sync (nil: the sync is off), asked once, before its first acquisition
// there: nothing is assumed of a master never heard from.
func (c *Client) learnedOf(ctx context.Context, lk *link) (*learned, error) {
	if !c.sync.Enabled {
		return nil, nil
	}
	m := c.master(lk.addr)
	if c.sync.learns() && !m.isKnown() {
		reply, err := lk.do(ctx, 0, infoArgs...)
		if err != nil {
			return nil, err
		}
		text, _ := reply.(string)
		m.learn(parseInfo(text), time.Now())
	}
	return m, nil
}

// acquisition is an acquisition's pipeline: the commands, and how much
// longer than the acquisition's own reply they may take to answer.
type acquisition struct {
	cmds  [][]any
	extra time.Duration
}

// acquisition is the acquisition args on the key name, then: after a
// resend with a request id (resentID), its latch's expiry set again (a
// latch's replay writes nothing on this connection, so WAIT would not cover
// the grant the first send wrote: this write puts the connection past it;
// a lock's HELD replay replicates a write of its own); WAIT and WAITAOF as
// learned (m nil: sync off); the periodic INFO when due. One round trip.
func (c *Client) acquisition(name string, args []any, m *learned, r request, resentID string) acquisition {
	p := acquisition{cmds: [][]any{args}}
	if m == nil {
		return p
	}
	if resentID != "" {
		p.cmds = append(p.cmds, []any{"PEXPIRE", acquireLatchKey(name, resentID), r.latchTTL()})
	}
	syncs := m.syncCommands(c.sync)
	p.cmds = append(p.cmds, syncs...)
	if len(syncs) > 0 {
		p.extra = time.Duration(len(syncs))*c.sync.Timeout + replyMargin
	}
	if c.sync.learns() && m.refreshDue(time.Now()) {
		p.cmds = append(p.cmds, infoArgs)
	}
	return p
}

// checkSync reads the replies behind the acquisition: what a refreshing
// INFO says is learned; a WAIT or WAITAOF that fell short is described
// ("" when all acknowledged); a reply lost is an error.
func (c *Client) checkSync(p acquisition, rs []result, m *learned) (string, error) {
	detail := ""
	var failure error
	for i, args := range p.cmds[1:] {
		res := rs[i+1]
		name, _ := args[0].(string)
		if name == "INFO" {
			if text, ok := res.reply.(string); ok && res.err == nil {
				m.learn(parseInfo(text), time.Now())
			}
			continue
		}
		if detail != "" || failure != nil {
			continue
		}
		said := strings.TrimSuffix(strings.TrimPrefix(fmt.Sprint(args), "["), "]")
		switch {
		case ioError(res.err):
			failure = res.err
		case res.err != nil && name == "WAITAOF" && c.sync.AOF == AOFAuto &&
			strings.Contains(strings.ToLower(res.err.Error()), "unknown command"):
			m.lacksWaitAOF() // before Redis 7.2: WAIT alone
		case res.err != nil && name == "PEXPIRE":
			failure = res.err
		case res.err != nil:
			detail = fmt.Sprintf("%s replied the error %v", said, res.err)
		case name == "WAIT":
			want, _ := args[1].(int64)
			if acked, err := integer(res.reply); err != nil || acked < want {
				detail = fmt.Sprintf("%s replied %v", said, res.reply)
			}
		case name == "WAITAOF":
			pair, _ := res.reply.([]any)
			if len(pair) != 2 {
				failure = fmt.Errorf("rwlock: unexpected WAITAOF reply %#v", res.reply)
			} else if local, err := integer(pair[0]); err != nil || local < 1 {
				detail = fmt.Sprintf("%s replied %v", said, res.reply)
			}
		}
	}
	return detail, failure
}
