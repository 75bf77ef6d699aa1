-- The nonce manager's state: the next nonce never handed out per (chain, account), and one row
-- per transaction the service signs. See docs/signing.md for the states and their transitions.

CREATE TABLE nonce_heads (
    chain_id   INTEGER NOT NULL,
    address    TEXT NOT NULL CHECK (length(address) = 42 AND address = lower(address)),
    next_nonce INTEGER NOT NULL CHECK (next_nonce >= 0),
    PRIMARY KEY (chain_id, address)
) STRICT;

CREATE TABLE txs (
    id              INTEGER PRIMARY KEY,
    chain_id        INTEGER NOT NULL,
    address         TEXT NOT NULL CHECK (length(address) = 42 AND address = lower(address)),
    nonce           INTEGER NOT NULL CHECK (nonce >= 0),
    principal       TEXT NOT NULL,
    kind            TEXT NOT NULL CHECK (kind IN ('send', 'sign', 'filler')),
    state           TEXT NOT NULL CHECK (state IN ('reserved', 'signed', 'broadcast', 'mined', 'confirmed',
                                                   'failed', 'handed_out', 'released')),
    fields          TEXT NOT NULL,   -- the validated transaction object (canonical JSON), to sign again
    max_cost        TEXT NOT NULL,   -- decimal wei: gas * price + value, for the funded check
    -- max_cost again as eight 32-bit limbs, least significant first: SQL can add these exactly
    -- (the inflight triggers below), which it cannot do with a 256-bit decimal.
    cost0 INTEGER NOT NULL DEFAULT 0, cost1 INTEGER NOT NULL DEFAULT 0, cost2 INTEGER NOT NULL DEFAULT 0,
    cost3 INTEGER NOT NULL DEFAULT 0, cost4 INTEGER NOT NULL DEFAULT 0, cost5 INTEGER NOT NULL DEFAULT 0,
    cost6 INTEGER NOT NULL DEFAULT 0, cost7 INTEGER NOT NULL DEFAULT 0,
    raw             BLOB,            -- the signed transaction, persisted before any broadcast
    hash            TEXT,            -- lowercase 0x hash of raw
    idempotency_key TEXT,
    block_number    INTEGER,
    block_hash      TEXT,
    error           TEXT,            -- why the row failed
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    expires_at      TEXT             -- handed_out rows: when the slot may be reused
) STRICT;

-- One live transaction per nonce; released and failed rows give their slot up.
CREATE UNIQUE INDEX txs_live_nonce ON txs (chain_id, address, nonce) WHERE state NOT IN ('released', 'failed');
CREATE UNIQUE INDEX txs_idempotency ON txs (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX txs_hash ON txs (hash);
CREATE INDEX txs_account_state ON txs (chain_id, address, state, nonce);
CREATE INDEX txs_state ON txs (chain_id, state);

-- The in-flight transactions of each account (states reserved, signed, broadcast, handed_out):
-- their number and the sum of their max costs in 32-bit limbs (each limb sum stays far below
-- 2^63), kept by triggers on every insert, state change and delete of txs, so that the funded
-- check and the in-flight cap read one row whatever the number of transactions in flight.
CREATE TABLE inflight (
    chain_id INTEGER NOT NULL,
    address  TEXT NOT NULL,
    n        INTEGER NOT NULL DEFAULT 0,
    c0 INTEGER NOT NULL DEFAULT 0, c1 INTEGER NOT NULL DEFAULT 0, c2 INTEGER NOT NULL DEFAULT 0,
    c3 INTEGER NOT NULL DEFAULT 0, c4 INTEGER NOT NULL DEFAULT 0, c5 INTEGER NOT NULL DEFAULT 0,
    c6 INTEGER NOT NULL DEFAULT 0, c7 INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chain_id, address)
) STRICT;

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
