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
