-- Webhooks: each state change of a principal's transaction is delivered to the principal's
-- endpoints (webhooks/). The outbox is written in the transaction that changes the state, by
-- the trigger below, so that no change is lost between the store and the deliverer, whatever
-- crashes when.
--
-- webhooks are the endpoints: from the config (source 'config', synced at start: upserted by
-- principal and url, disabled when no longer configured) or the admin API (source 'admin').
-- secret is the HMAC-SHA256 key of the signatures (never shown after creation).
CREATE TABLE webhooks (
    id         TEXT PRIMARY KEY CHECK (id <> ''),
    principal  TEXT NOT NULL CHECK (principal <> ''),
    url        TEXT NOT NULL CHECK (url <> ''),
    secret     TEXT NOT NULL CHECK (secret <> ''),
    source     TEXT NOT NULL CHECK (source IN ('config', 'admin')),
    enabled    INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at TEXT NOT NULL
) STRICT;
CREATE UNIQUE INDEX webhooks_principal_url ON webhooks (principal, url);
-- The trigger's one lookup: does the principal have an enabled endpoint?
CREATE INDEX webhooks_enabled ON webhooks (principal) WHERE enabled = 1;

-- webhook_events: one row per state change of a transaction whose principal had an enabled
-- endpoint at the time; a snapshot of what changed. seq orders them (AUTOINCREMENT: never
-- reused, so an event id evt_<seq> names one event forever). created_at is the transaction's
-- updated_at of the change (a store timestamp).
CREATE TABLE webhook_events (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    tx_id        INTEGER NOT NULL,
    principal    TEXT NOT NULL,
    state        TEXT NOT NULL,
    hash         TEXT,
    mined_hash   TEXT,
    block_number INTEGER,
    block_hash   TEXT,
    error        TEXT,
    created_at   TEXT NOT NULL
) STRICT;

-- webhook_deliveries: one per (event, enabled endpoint of its principal), created by the
-- trigger with the event, so the endpoints an event goes to are those of the moment of the
-- change. state: pending (to try at next_attempt_at), delivered, dead (maxAttempts failed).
-- A pending delivery holds back the later events of the same transaction to the same
-- endpoint (tx_id is here for that rule's index). last_error never holds a secret and is
-- bounded by the deliverer.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id      TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_seq       INTEGER NOT NULL REFERENCES webhook_events (seq),
    tx_id           INTEGER NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'dead')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TEXT NOT NULL,
    last_status     INTEGER,
    last_error      TEXT,
    delivered_at    TEXT,
    created_at      TEXT NOT NULL
) STRICT;
-- The deliverer's poll: pending deliveries due by now.
CREATE UNIQUE INDEX webhook_deliveries_webhook_event ON webhook_deliveries (webhook_id, event_seq);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
-- Order per transaction: an earlier pending event of the same transaction and endpoint.
CREATE INDEX webhook_deliveries_order ON webhook_deliveries (webhook_id, tx_id, event_seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (event_seq);
-- Retention (webhooks.retention): the finished deliveries by when they finished (a delivered
-- or dead delivery's next_attempt_at is the time of its last attempt), and the events by age.
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (next_attempt_at) WHERE state <> 'pending';
CREATE INDEX webhook_events_created ON webhook_events (created_at);

-- Only the request states a caller acts on; a change to any other (reserved, signed,
-- handed_out) writes nothing. For a principal without an enabled endpoint the cost is the
-- one indexed EXISTS.
CREATE TRIGGER txs_webhook_event AFTER UPDATE OF state ON txs
WHEN NEW.state <> OLD.state
 AND NEW.state IN ('broadcast', 'mined', 'confirmed', 'failed', 'released', 'abandoned', 'stuck', 'cancelled')
 AND EXISTS (SELECT 1 FROM webhooks WHERE principal = NEW.principal AND enabled = 1)
BEGIN
    INSERT INTO webhook_events (tx_id, principal, state, hash, mined_hash, block_number, block_hash, error, created_at)
    VALUES (NEW.id, NEW.principal, NEW.state, NEW.hash, NEW.mined_hash, NEW.block_number, NEW.block_hash, NEW.error, NEW.updated_at);
    -- last_insert_rowid() is the event's seq while the trigger runs.
    INSERT INTO webhook_deliveries (webhook_id, event_seq, tx_id, state, next_attempt_at, created_at)
    SELECT id, last_insert_rowid(), NEW.id, 'pending', NEW.updated_at, NEW.updated_at
    FROM webhooks WHERE principal = NEW.principal AND enabled = 1;
END;
