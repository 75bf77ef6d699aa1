package subscribe

import (
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/feeds"
	"github.com/web3gate/web3gate/proxy"
)

// headsSink delivers a newHeads subscription: each new block's header, as the feed shares
// it (each notification is the subscription's prefix, the shared header and "}}": nothing
// is built per subscriber). Removed blocks are not notified, as geth notifies the new
// branch's heads only.
type headsSink struct {
	sub proxy.Subscription
}

var _ feeds.Sink = (*headsSink)(nil)

// Deliver implements feeds.Sink.
func (h *headsSink) Deliver(ev feeds.Event) {
	if ev.Removed {
		return
	}
	h.sub.Notify(ev.Block.Header)
}

// logsSink delivers a logs subscription: each log of a new block within span that matches,
// then, on a reorg, the logs of the blocks that left the chain again with "removed": true
// (the feed sends those first, oldest block first), as geth does. A block's matching logs are
// queued at once (NotifyAll), as its chain's logsMemo matched them for every subscription
// with the same criteria.
type logsSink struct {
	sub  proxy.Subscription
	crit *feeds.Criteria
	span blockRange
	key  string // criteriaKey(crit)
	memo *logsMemo
}

var _ feeds.Sink = (*logsSink)(nil)

// Deliver implements feeds.Sink.
func (l *logsSink) Deliver(ev feeds.Event) {
	if n := ev.Block.Number; n < l.span.from || n > l.span.to {
		return
	}
	l.sub.NotifyAll(l.memo.match(ev, l.key, l.crit))
}

// logsMemo is the logs of one chain's current event that match each of the criteria its
// subscriptions asked for: matched once per distinct criteria and event, rather than once
// per subscription. It is used on the chain's feed goroutine alone (Deliver), and keeps its
// arrays from one event to the next.
type logsMemo struct {
	block   *feeds.Block // the current event
	removed bool
	idx     map[string]int // criteriaKey → sets
	sets    [][][]byte     // the matching logs' objects, for each criteria seen in the event
	n       int            // sets in use
}

// match returns the objects of ev's logs that crit (whose key is key) matches: Raw, or
// RawRemoved for a removed block. The result is the memo's until the next event.
func (m *logsMemo) match(ev feeds.Event, key string, crit *feeds.Criteria) [][]byte {
	if ev.Block != m.block || ev.Removed != m.removed {
		m.block, m.removed = ev.Block, ev.Removed
		clear(m.idx)
		for i := range m.sets[:m.n] {
			clear(m.sets[i])
			m.sets[i] = m.sets[i][:0]
		}
		m.n = 0
	}
	if i, ok := m.idx[key]; ok {
		return m.sets[i]
	}
	if m.n == len(m.sets) {
		m.sets = append(m.sets, nil)
	}
	set := m.sets[m.n][:0]
	logs := ev.Block.Logs
	for i := range logs {
		if !crit.Match(&logs[i]) {
			continue
		}
		if ev.Removed {
			set = append(set, logs[i].RawRemoved)
		} else {
			set = append(set, logs[i].Raw)
		}
	}
	m.sets[m.n] = set
	if m.idx == nil {
		m.idx = map[string]int{}
	}
	m.idx[key] = m.n
	m.n++
	return set
}

// criteriaKey is what Match reads of c, as a string: criteria with the same key match the
// same logs.
func criteriaKey(c *feeds.Criteria) string {
	var b strings.Builder
	b.Grow(2 + len(c.Addresses)*len(common.Address{}) + len(c.Topics)*(2+len(common.Hash{})))
	b.WriteByte(byte(len(c.Addresses) >> 8))
	b.WriteByte(byte(len(c.Addresses)))
	for _, a := range c.Addresses {
		b.Write(a[:])
	}
	for _, pos := range c.Topics {
		b.WriteByte(byte(len(pos) >> 8))
		b.WriteByte(byte(len(pos)))
		for _, h := range pos {
			b.Write(h[:])
		}
	}
	return b.String()
}
