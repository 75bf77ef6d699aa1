// The periods of a quota (UTC day and calendar month): their indexes, names and bounds.

package quotas

import (
	"time"

	"github.com/web3gate/web3gate/store"
)

// Periods, indexes of the per-period arrays.
const (
	day = iota
	month
	periods
)

var (
	periodNames = [periods]string{store.UsageDay, store.UsageMonth}
	periodWords = [periods]string{"daily", "monthly"}
)

// periodStart is the first instant of the period of kind p that holds t (UTC).
func periodStart(p int, t time.Time) time.Time {
	t = t.UTC()
	if p == day {
		return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	}
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// periodEnd is the first instant after the period of kind p that starts at start.
func periodEnd(p int, start time.Time) time.Time {
	if p == day {
		return start.AddDate(0, 0, 1)
	}
	return start.AddDate(0, 1, 0)
}

func periodIndex(name string) int {
	if name == store.UsageMonth {
		return month
	}
	return day
}
