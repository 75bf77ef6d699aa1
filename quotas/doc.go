// Package quotas keeps the quotas of compute units per client id and UTC day or calendar month
// (the `quotas:` section): the rate-limit stage charges each call's units through Book.Charge,
// which refuses a client whose quota of the period is spent.
//
// Usage is durable in the store, one row per (client id, period kind, period start), summed
// over every replica. Charge never waits for the store: it adds to counters in memory, and a
// flusher adds them to the store every flushInterval with one atomic upsert per row
// (units = units + the delta, RETURNING units), which tells it the sum of every replica's
// flushed charges. A quota is enforced on that last known total plus this replica's charges
// not yet flushed, so the replicas together can overshoot a quota by what they charge within
// about one flush interval. The total of a row this replica has not seen yet is read from
// the store in the background; until it is known the charges are allowed and counted.
//
// The store down: charges go on from memory (no request fails for it), their deltas are kept
// and added at the first flush that succeeds; each failed flush is logged and counted.
package quotas
