-- Fee bumping, speed-up and cancel: SQLite's 0015 (read its comments), in PostgreSQL's words.

ALTER TABLE txs DROP CONSTRAINT txs_state_check;
ALTER TABLE txs ADD CONSTRAINT txs_state_check CHECK (state IN ('reserved', 'signed', 'broadcast', 'mined', 'confirmed',
    'failed', 'handed_out', 'released', 'abandoned', 'stuck', 'cancelled'));
ALTER TABLE txs ADD COLUMN mined_hash text COLLATE "C";
ALTER TABLE txs ADD COLUMN fee_bump text COLLATE "C" CHECK (fee_bump IN ('allow', 'deny'));
ALTER TABLE txs ADD COLUMN versions bigint NOT NULL DEFAULT 0 CHECK (versions >= 0);
UPDATE txs SET mined_hash = hash WHERE state IN ('mined', 'confirmed');

CREATE INDEX txs_versioned ON txs (chain_id) WHERE versions > 0 AND state IN ('signed', 'broadcast', 'stuck');

-- 'stuck' counts in flight: the triggers of 0001 again with the new state set.
DROP TRIGGER txs_inflight_insert ON txs;
DROP TRIGGER txs_inflight_enter ON txs;
DROP TRIGGER txs_inflight_leave ON txs;
DROP TRIGGER txs_inflight_delete ON txs;

CREATE TRIGGER txs_inflight_insert AFTER INSERT ON txs FOR EACH ROW
WHEN (NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_add();

CREATE TRIGGER txs_inflight_enter AFTER UPDATE OF state ON txs FOR EACH ROW
WHEN (OLD.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
  AND NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_add();

CREATE TRIGGER txs_inflight_leave AFTER UPDATE OF state ON txs FOR EACH ROW
WHEN (OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
  AND NEW.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_sub();

CREATE TRIGGER txs_inflight_delete AFTER DELETE ON txs FOR EACH ROW
WHEN (OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_sub();

-- A max cost raised while the row stays in flight: the sums follow (see SQLite's 0015).
CREATE FUNCTION txs_inflight_cost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inflight SET
        c0 = c0 + NEW.cost0 - OLD.cost0, c1 = c1 + NEW.cost1 - OLD.cost1, c2 = c2 + NEW.cost2 - OLD.cost2,
        c3 = c3 + NEW.cost3 - OLD.cost3, c4 = c4 + NEW.cost4 - OLD.cost4, c5 = c5 + NEW.cost5 - OLD.cost5,
        c6 = c6 + NEW.cost6 - OLD.cost6, c7 = c7 + NEW.cost7 - OLD.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
    RETURN NULL;
END
$$;

CREATE TRIGGER txs_inflight_cost AFTER UPDATE OF cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7 ON txs FOR EACH ROW
WHEN (OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
  AND NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_cost();

CREATE TABLE tx_versions (
    tx_id      bigint NOT NULL,
    seq        bigint NOT NULL CHECK (seq >= 1),
    chain_id   bigint NOT NULL,
    kind       text COLLATE "C" NOT NULL CHECK (kind IN ('bump', 'speedup', 'cancel')),
    state      text COLLATE "C" NOT NULL CHECK (state IN ('signed', 'broadcast')),
    fields     text COLLATE "C" NOT NULL,
    max_cost   text COLLATE "C" NOT NULL,
    raw        bytea NOT NULL,
    hash       text COLLATE "C" NOT NULL,
    created_at text COLLATE "C" NOT NULL,
    updated_at text COLLATE "C" NOT NULL,
    PRIMARY KEY (tx_id, seq)
);

CREATE INDEX tx_versions_hash ON tx_versions (hash);
