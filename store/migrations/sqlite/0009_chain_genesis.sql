-- A chain that started over: the genesis hash of every configured chain, recorded at start,
-- and a transaction state for the rows of a chain whose genesis changed since.
--
-- At start web3gate reads each chain's block 0 and compares its hash with the one recorded
-- here (wallet/genesis.go). A different hash means the node now serves another chain under
-- the same chain id (the embedded dev chain at every start, a dev node reset): the rows of
-- the previous chain become 'abandoned' (never sent again, not in flight, their nonces and
-- idempotency keys free) and its nonce heads are dropped, so nonces come from the node again.

CREATE TABLE chain_genesis (
    chain_id    INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL CHECK (length(hash) = 66 AND hash = lower(hash)),
    recorded_at TEXT NOT NULL
) STRICT;

-- SQLite cannot change a CHECK constraint in place, so txs is rebuilt as SQLite's
-- documentation describes (lang_altertable.html, "other kinds of table schema changes"):
-- a new table with the new constraint, the rows copied as they are (ids, states and cost
-- limbs unchanged, so the inflight sums stay true), the old table dropped, the new one
-- renamed, then the indexes and triggers of 0002 created again. The triggers are dropped
-- first, explicitly; the copy inserts into txs_new, which has none, so inflight is not
-- touched. Nothing references txs by foreign key. Only the state CHECK and the partial
-- index txs_live_nonce change: an abandoned row holds no nonce.

DROP TRIGGER txs_inflight_insert;
DROP TRIGGER txs_inflight_enter;
DROP TRIGGER txs_inflight_leave;
DROP TRIGGER txs_inflight_delete;

CREATE TABLE txs_new (
    id              INTEGER PRIMARY KEY,
    chain_id        INTEGER NOT NULL,
    address         TEXT NOT NULL CHECK (length(address) = 42 AND address = lower(address)),
    nonce           INTEGER NOT NULL CHECK (nonce >= 0),
    principal       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('send', 'sign', 'filler')),
    state           TEXT NOT NULL CHECK (state IN ('reserved', 'signed', 'broadcast', 'mined', 'confirmed',
                                                   'failed', 'handed_out', 'released', 'abandoned')),
    fields          TEXT NOT NULL,   -- the validated transaction object (canonical JSON), to sign again
    max_cost        TEXT NOT NULL,   -- decimal wei: gas * price + value, for the funded check
    -- max_cost again as eight 32-bit limbs, least significant first (see 0002).
    cost0 INTEGER NOT NULL DEFAULT 0, cost1 INTEGER NOT NULL DEFAULT 0, cost2 INTEGER NOT NULL DEFAULT 0,
    cost3 INTEGER NOT NULL DEFAULT 0, cost4 INTEGER NOT NULL DEFAULT 0, cost5 INTEGER NOT NULL DEFAULT 0,
    cost6 INTEGER NOT NULL DEFAULT 0, cost7 INTEGER NOT NULL DEFAULT 0,
    raw             BLOB,            -- the signed transaction, persisted before any broadcast
    hash            TEXT,            -- lowercase 0x hash of raw
    idempotency_key TEXT,
    block_number    INTEGER,
    block_hash      TEXT,
    error           TEXT,            -- why the row failed or was abandoned
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    expires_at      TEXT             -- handed_out rows: when the slot may be reused
) STRICT;

INSERT INTO txs_new (id, chain_id, address, nonce, principal, kind, state, fields, max_cost,
                     cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7,
                     raw, hash, idempotency_key, block_number, block_hash, error,
                     created_at, updated_at, expires_at)
SELECT id, chain_id, address, nonce, principal, kind, state, fields, max_cost,
       cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7,
       raw, hash, idempotency_key, block_number, block_hash, error,
       created_at, updated_at, expires_at
FROM txs;

DROP TABLE txs;
ALTER TABLE txs_new RENAME TO txs;

-- One live transaction per nonce; released, failed and abandoned rows give their slot up.
CREATE UNIQUE INDEX txs_live_nonce ON txs (chain_id, address, nonce) WHERE state NOT IN ('released', 'failed', 'abandoned');
CREATE UNIQUE INDEX txs_idempotency ON txs (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX txs_hash ON txs (hash);
CREATE INDEX txs_account_state ON txs (chain_id, address, state, nonce);
CREATE INDEX txs_state ON txs (chain_id, state);

-- The inflight triggers of 0002, unchanged: 'abandoned' is not an in-flight state, so a row
-- abandoned leaves the counts as a failed one does.
CREATE TRIGGER txs_inflight_insert AFTER INSERT ON txs
WHEN NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out')
BEGIN
    INSERT OR IGNORE INTO inflight (chain_id, address) VALUES (NEW.chain_id, NEW.address);
    UPDATE inflight SET n = n + 1,
        c0 = c0 + NEW.cost0, c1 = c1 + NEW.cost1, c2 = c2 + NEW.cost2, c3 = c3 + NEW.cost3,
        c4 = c4 + NEW.cost4, c5 = c5 + NEW.cost5, c6 = c6 + NEW.cost6, c7 = c7 + NEW.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
END;

CREATE TRIGGER txs_inflight_enter AFTER UPDATE OF state ON txs
WHEN OLD.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out')
 AND NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out')
BEGIN
    INSERT OR IGNORE INTO inflight (chain_id, address) VALUES (NEW.chain_id, NEW.address);
    UPDATE inflight SET n = n + 1,
        c0 = c0 + NEW.cost0, c1 = c1 + NEW.cost1, c2 = c2 + NEW.cost2, c3 = c3 + NEW.cost3,
        c4 = c4 + NEW.cost4, c5 = c5 + NEW.cost5, c6 = c6 + NEW.cost6, c7 = c7 + NEW.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
END;

CREATE TRIGGER txs_inflight_leave AFTER UPDATE OF state ON txs
WHEN OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out')
 AND NEW.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out')
BEGIN
    UPDATE inflight SET n = n - 1,
        c0 = c0 - OLD.cost0, c1 = c1 - OLD.cost1, c2 = c2 - OLD.cost2, c3 = c3 - OLD.cost3,
        c4 = c4 - OLD.cost4, c5 = c5 - OLD.cost5, c6 = c6 - OLD.cost6, c7 = c7 - OLD.cost7
    WHERE chain_id = OLD.chain_id AND address = OLD.address;
END;

CREATE TRIGGER txs_inflight_delete AFTER DELETE ON txs
WHEN OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out')
BEGIN
    UPDATE inflight SET n = n - 1,
        c0 = c0 - OLD.cost0, c1 = c1 - OLD.cost1, c2 = c2 - OLD.cost2, c3 = c3 - OLD.cost3,
        c4 = c4 - OLD.cost4, c5 = c5 - OLD.cost5, c6 = c6 - OLD.cost6, c7 = c7 - OLD.cost7
    WHERE chain_id = OLD.chain_id AND address = OLD.address;
END;
