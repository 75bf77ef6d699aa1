package subscribe

import (
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
// (the feed sends those first, oldest block first), as geth does.
type logsSink struct {
	sub  proxy.Subscription
	crit *feeds.Criteria
	span blockRange
}

var _ feeds.Sink = (*logsSink)(nil)

// Deliver implements feeds.Sink.
func (l *logsSink) Deliver(ev feeds.Event) {
	if n := ev.Block.Number; n < l.span.from || n > l.span.to {
		return
	}
	logs := ev.Block.Logs
	for i := range logs {
		if !l.crit.Match(&logs[i]) {
			continue
		}
		if ev.Removed {
			l.sub.Notify(logs[i].RawRemoved)
			continue
		}
		l.sub.Notify(logs[i].Raw)
	}
}
