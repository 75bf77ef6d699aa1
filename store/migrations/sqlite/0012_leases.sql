-- Leases: jobs that must run in one process at a time (the confirmer and the owners indexer
-- of each chain) run under a lease named after them (lease/). On SQLite, which has no
-- advisory locks, a lease is this row: its holder (replica id and a random instance tag),
-- an epoch that grows by one at each acquisition, and an expiry the holder moves forward
-- while it runs the job. Another process takes the lease over only once the expiry has
-- passed; the holder cancels its own job before that, when it could not renew in time.
-- A holder that stops cleanly sets expires_at to the time it stopped, so the next one does not
-- wait. Times are store timestamps (fixed-width RFC 3339 UTC), so text order is time order.
-- A plain table with nothing SQLite-only.

CREATE TABLE leases (
    name        TEXT PRIMARY KEY CHECK (name <> ''),
    holder      TEXT NOT NULL CHECK (holder <> ''),
    epoch       INTEGER NOT NULL CHECK (epoch > 0),
    expires_at  TEXT NOT NULL,
    acquired_at TEXT NOT NULL,
    renewed_at  TEXT NOT NULL
);
