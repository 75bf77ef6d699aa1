-- Fee bumping, speed-up and cancel: more than one signed transaction for one request's nonce.
--
-- A request (a txs row) keeps the hash its caller got (txs.hash, the original) and its raw
-- bytes; every later version signed at the same nonce (a bump by the confirmer, a speed-up
-- or a cancel through the REST routes) is a row of tx_versions, stored with its bytes before
-- it is broadcast. Whichever version a block takes settles the request: txs.mined_hash names
-- it (NULL until mined), the request becomes mined (cancelled for a cancel version) and the
-- other versions count as replaced. A version's stored state is signed or broadcast; mined
-- and replaced are read from txs.mined_hash, so mining a request writes one row.
--
-- Two request states are new: 'stuck' (the next bump would pass a cap: still in flight,
-- rebroadcast, may still be mined or cancelled) and 'cancelled' (the cancel version was
-- mined). txs.versions counts the request's versions besides the original (0 on the common
-- path: nothing of this migration is read for such a request), txs.fee_bump records the
-- caller's X-Fee-Bump header ('allow', 'deny', NULL when not sent).
--
-- SQLite cannot change a CHECK constraint in place: txs is rebuilt as in 0009 (rows copied as
-- they are, ids and cost limbs unchanged; the triggers dropped first, so inflight is not
-- touched), with 'stuck' counted in flight by the triggers, and one more trigger that follows
-- a change of a row's max cost while it is in flight (a bumped version costs more).

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
                                                   'failed', 'handed_out', 'released', 'abandoned',
                                                   'stuck', 'cancelled')),
    fields          TEXT NOT NULL,   -- the validated transaction object (canonical JSON), to sign again
    max_cost        TEXT NOT NULL,   -- decimal wei: the highest max cost of its versions
    -- max_cost again as eight 32-bit limbs, least significant first (see 0002).
    cost0 INTEGER NOT NULL DEFAULT 0, cost1 INTEGER NOT NULL DEFAULT 0, cost2 INTEGER NOT NULL DEFAULT 0,
    cost3 INTEGER NOT NULL DEFAULT 0, cost4 INTEGER NOT NULL DEFAULT 0, cost5 INTEGER NOT NULL DEFAULT 0,
    cost6 INTEGER NOT NULL DEFAULT 0, cost7 INTEGER NOT NULL DEFAULT 0,
    raw             BLOB,            -- the original signed transaction, persisted before any broadcast
    hash            TEXT,            -- lowercase 0x hash of raw: the hash the caller got
    idempotency_key TEXT,
    block_number    INTEGER,
    block_hash      TEXT,
    error           TEXT,            -- why the row failed or was abandoned
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    expires_at      TEXT,            -- handed_out rows: when the slot may be reused
    request         TEXT,
    filled          TEXT,
    mined_hash      TEXT,            -- the hash of the version in the block (original or not)
    fee_bump        TEXT CHECK (fee_bump IN ('allow', 'deny')),
    versions        INTEGER NOT NULL DEFAULT 0 CHECK (versions >= 0)
) STRICT;

INSERT INTO txs_new (id, chain_id, address, nonce, principal, kind, state, fields, max_cost,
                     cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7,
                     raw, hash, idempotency_key, block_number, block_hash, error,
                     created_at, updated_at, expires_at, request, filled, mined_hash)
SELECT id, chain_id, address, nonce, principal, kind, state, fields, max_cost,
       cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7,
       raw, hash, idempotency_key, block_number, block_hash, error,
       created_at, updated_at, expires_at, request, filled,
       CASE WHEN state IN ('mined', 'confirmed') THEN hash END
FROM txs;

DROP TABLE txs;
ALTER TABLE txs_new RENAME TO txs;

CREATE UNIQUE INDEX txs_live_nonce ON txs (chain_id, address, nonce) WHERE state NOT IN ('released', 'failed', 'abandoned');
CREATE UNIQUE INDEX txs_idempotency ON txs (principal, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX txs_hash ON txs (hash);
CREATE INDEX txs_account_state ON txs (chain_id, address, state, nonce);
CREATE INDEX txs_state ON txs (chain_id, state);
-- The open requests that have versions: the confirmer reads their hashes once per pass.
CREATE INDEX txs_versioned ON txs (chain_id) WHERE versions > 0 AND state IN ('signed', 'broadcast', 'stuck');

CREATE TRIGGER txs_inflight_insert AFTER INSERT ON txs
WHEN NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
BEGIN
    INSERT OR IGNORE INTO inflight (chain_id, address) VALUES (NEW.chain_id, NEW.address);
    UPDATE inflight SET n = n + 1,
        c0 = c0 + NEW.cost0, c1 = c1 + NEW.cost1, c2 = c2 + NEW.cost2, c3 = c3 + NEW.cost3,
        c4 = c4 + NEW.cost4, c5 = c5 + NEW.cost5, c6 = c6 + NEW.cost6, c7 = c7 + NEW.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
END;

CREATE TRIGGER txs_inflight_enter AFTER UPDATE OF state ON txs
WHEN OLD.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
 AND NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
BEGIN
    INSERT OR IGNORE INTO inflight (chain_id, address) VALUES (NEW.chain_id, NEW.address);
    UPDATE inflight SET n = n + 1,
        c0 = c0 + NEW.cost0, c1 = c1 + NEW.cost1, c2 = c2 + NEW.cost2, c3 = c3 + NEW.cost3,
        c4 = c4 + NEW.cost4, c5 = c5 + NEW.cost5, c6 = c6 + NEW.cost6, c7 = c7 + NEW.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
END;

CREATE TRIGGER txs_inflight_leave AFTER UPDATE OF state ON txs
WHEN OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
 AND NEW.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
BEGIN
    UPDATE inflight SET n = n - 1,
        c0 = c0 - OLD.cost0, c1 = c1 - OLD.cost1, c2 = c2 - OLD.cost2, c3 = c3 - OLD.cost3,
        c4 = c4 - OLD.cost4, c5 = c5 - OLD.cost5, c6 = c6 - OLD.cost6, c7 = c7 - OLD.cost7
    WHERE chain_id = OLD.chain_id AND address = OLD.address;
END;

CREATE TRIGGER txs_inflight_delete AFTER DELETE ON txs
WHEN OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
BEGIN
    UPDATE inflight SET n = n - 1,
        c0 = c0 - OLD.cost0, c1 = c1 - OLD.cost1, c2 = c2 - OLD.cost2, c3 = c3 - OLD.cost3,
        c4 = c4 - OLD.cost4, c5 = c5 - OLD.cost5, c6 = c6 - OLD.cost6, c7 = c7 - OLD.cost7
    WHERE chain_id = OLD.chain_id AND address = OLD.address;
END;

-- A row whose max cost changes while it stays in flight (a bump raised it): the sums follow.
-- A change of state out of flight in the same statement is the leave trigger's (it subtracts
-- the old cost, all the sums held); into flight, the enter trigger's (it adds the new one).
CREATE TRIGGER txs_inflight_cost AFTER UPDATE OF cost0, cost1, cost2, cost3, cost4, cost5, cost6, cost7 ON txs
WHEN OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
 AND NEW.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
BEGIN
    UPDATE inflight SET
        c0 = c0 + NEW.cost0 - OLD.cost0, c1 = c1 + NEW.cost1 - OLD.cost1, c2 = c2 + NEW.cost2 - OLD.cost2,
        c3 = c3 + NEW.cost3 - OLD.cost3, c4 = c4 + NEW.cost4 - OLD.cost4, c5 = c5 + NEW.cost5 - OLD.cost5,
        c6 = c6 + NEW.cost6 - OLD.cost6, c7 = c7 + NEW.cost7 - OLD.cost7
    WHERE chain_id = NEW.chain_id AND address = NEW.address;
END;

-- The versions of a request after its original, seq 1, 2, ... in signing order.
CREATE TABLE tx_versions (
    tx_id      INTEGER NOT NULL,  -- txs.id
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    chain_id   INTEGER NOT NULL,
    kind       TEXT NOT NULL CHECK (kind IN ('bump', 'speedup', 'cancel')),
    state      TEXT NOT NULL CHECK (state IN ('signed', 'broadcast')),
    fields     TEXT NOT NULL,     -- the signed transaction object (canonical JSON)
    max_cost   TEXT NOT NULL,     -- decimal wei
    raw        BLOB NOT NULL,     -- stored before the first broadcast
    hash       TEXT NOT NULL,     -- lowercase 0x hash of raw
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (tx_id, seq)
) STRICT;

CREATE INDEX tx_versions_hash ON tx_versions (hash);
