-- Quota usage (middleware/ratelimit/quota): the compute units a client id spent in one period,
-- a UTC day or a UTC calendar month. Each replica adds its charges to the row of the period in
-- batches (one upsert per row and flush, units = units + the batch's), so that the rows hold
-- the sum of every replica's charges. period_start is the period's first instant as a store
-- timestamp (fixed-width RFC 3339 UTC), so text order is time order. Rows of past periods are
-- kept, for the admin usage route and for accounting, until the flusher prunes those that
-- started more than 13 months ago.

CREATE TABLE quota_usage (
    client_id    TEXT NOT NULL CHECK (client_id <> ''),
    period       TEXT NOT NULL CHECK (period IN ('day', 'month')),
    period_start TEXT NOT NULL,
    units        INTEGER NOT NULL CHECK (units >= 0),
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (client_id, period, period_start)
) STRICT;
-- The pruning of old periods.
CREATE INDEX quota_usage_start ON quota_usage (period_start);
