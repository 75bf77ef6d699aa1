// A client id's usage of the current day and month, as the admin route reports it.

package quotas

import (
	"context"
	"fmt"
	"time"

	"github.com/web3gate/web3gate/store"
)

// Usage is what the admin route reports of one client id and period.
type Usage struct {
	Start     time.Time `json:"start"`
	Used      uint64    `json:"used"`
	Quota     *uint64   `json:"quota"`     // null: no quota
	Remaining *uint64   `json:"remaining"` // null: no quota
	ResetsAt  time.Time `json:"resetsAt"`
}

// ClientUsage is the admin route's answer.
type ClientUsage struct {
	ClientID string `json:"clientId"`
	// Enforced: quotas are enabled and the client id has a quota.
	Enforced bool  `json:"enforced"`
	Day      Usage `json:"day"`
	Month    Usage `json:"month"`
}

// Usage reads clientID's usage of the current day and month: the store's totals (every
// replica's flushed charges) and this replica's charges not yet flushed.
func (b *Book) Usage(ctx context.Context, clientID string) (*ClientUsage, error) {
	now := b.now().UTC()
	var totals [periods]uint64
	err := b.db.Read(ctx, func(tx *store.DBTx) error {
		for p := range periods {
			n, err := tx.Usage(ctx, store.UsageKey{ClientID: clientID, Period: periodNames[p], Start: periodStart(p, now)})
			if err != nil {
				return err
			}
			totals[p] = n
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("quotas: read usage: %w", err)
	}
	q, configured := b.quotas[clientID]
	u := &ClientUsage{ClientID: clientID, Enforced: b.cfg.Enabled && configured}
	b.mu.Lock()
	c := b.clients[clientID]
	for p := range periods {
		start := periodStart(p, now)
		if c != nil && c.cur[p] != nil && c.cur[p].start.Equal(start) {
			totals[p] = satAdd(totals[p], c.cur[p].unflushed())
		}
	}
	b.mu.Unlock()
	for p, dst := range [periods]*Usage{&u.Day, &u.Month} {
		start := periodStart(p, now)
		*dst = Usage{Start: start, Used: min(totals[p], maxQuota), ResetsAt: periodEnd(p, start)}
		if q[p] > 0 {
			quota, remaining := q[p], uint64(0)
			if dst.Used < quota {
				remaining = quota - dst.Used
			}
			dst.Quota, dst.Remaining = &quota, &remaining
		}
	}
	return u, nil
}
