-- The quota_usage table of SQLite's 0014 (the compute units a client id spent per UTC day and
-- month, summed over the replicas), so that both schemas stay one. The comments of the SQLite
-- file say what each column is for.

CREATE TABLE quota_usage (
    client_id    text COLLATE "C" NOT NULL CHECK (client_id <> ''),
    period       text COLLATE "C" NOT NULL CHECK (period IN ('day', 'month')),
    period_start text COLLATE "C" NOT NULL,
    units        bigint NOT NULL CHECK (units >= 0),
    updated_at   text COLLATE "C" NOT NULL,
    PRIMARY KEY (client_id, period, period_start)
);
CREATE INDEX quota_usage_start ON quota_usage (period_start);
