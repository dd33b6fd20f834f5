package main

import (
	"errors"
	"testing"
)

// serverReply is an error reply as go-redis reports one (a redis.Error).
type serverReply string

func (e serverReply) Error() string { return string(e) }
func (serverReply) RedisError()     {}

// Every slot lies in the range its shard is given, and the ranges cover
// the 16384 slots once: the cluster's locks are placed by shardOfSlot.
func TestSlotRanges(t *testing.T) {
	next := 0
	for s := 0; s < clusterShards; s++ {
		lo, hi := slotRange(s)
		if lo != next || hi < lo {
			t.Fatalf("shard %d: slots %d-%d after %d", s, lo, hi, next-1)
		}
		for _, slot := range []int{lo, (lo + hi) / 2, hi} {
			if got := shardOfSlot(int64(slot)); got != s {
				t.Fatalf("slot %d: shard %d, want %d", slot, got, s)
			}
		}
		next = hi + 1
	}
	if next != 16384 {
		t.Fatalf("the ranges end at %d", next-1)
	}
}

// A cluster's redirection and its down shard refuse the command before it
// writes; a lost reply is not a refusal.
func TestRefusedBeforeWritingInCluster(t *testing.T) {
	for _, text := range []string{"MOVED 3999 127.0.0.1:7000", "CLUSTERDOWN The cluster is down", "NOREPLICAS Not enough good replicas to write."} {
		if !refusedBeforeWriting(serverReply(text)) {
			t.Errorf("%q: not a refusal", text)
		}
	}
	if refusedBeforeWriting(errors.New("MOVED but not a server reply")) {
		t.Error("a client-side error counted as a refusal")
	}
}
