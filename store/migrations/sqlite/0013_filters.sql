-- HTTP filters (eth_newFilter, eth_newBlockFilter): their state lives here so that any replica
-- serves any poll (middleware/filters). A filter belongs to one chain and one owner (the
-- principal of the bearer token, else "client:" and the client id) and is found by its random
-- id together with both: another owner's or another chain's id is "filter not found".
--
-- kind is 'logs' or 'blocks'; criteria is the logs filter as canonical JSON (NULL for blocks).
-- The cursor (cursor_number, cursor_hash) is the last block a poll reported; seq grows by one
-- at each poll that moved it, and a poll moves it only from the seq it read (compare and
-- swap), so two concurrent polls never report the same changes twice. expires_at moves
-- forward at each poll; rows past it are not found and are deleted by the sweeper. dropped is
-- NULL while the filter lives, else why it was dropped (a poll too large): a dropped filter is
-- not found, counts toward no limit, and is deleted at its expiry. Times are store timestamps
-- (fixed-width RFC 3339 UTC), so text order is time order.

CREATE TABLE filters (
    id            TEXT PRIMARY KEY CHECK (length(id) = 34 AND id = lower(id)),
    chain_id      INTEGER NOT NULL,
    owner         TEXT NOT NULL CHECK (owner <> ''),
    kind          TEXT NOT NULL CHECK (kind IN ('logs', 'blocks')),
    criteria      TEXT,
    cursor_number INTEGER NOT NULL CHECK (cursor_number >= 0),
    cursor_hash   TEXT NOT NULL CHECK (length(cursor_hash) = 66 AND cursor_hash = lower(cursor_hash)),
    seq           INTEGER NOT NULL CHECK (seq >= 0),
    dropped       TEXT,
    created_at    TEXT NOT NULL,
    expires_at    TEXT NOT NULL
) STRICT;
-- The per-owner count at creation.
CREATE INDEX filters_owner ON filters (owner, expires_at);
-- The sweeper's deletion and the alive count per chain.
CREATE INDEX filters_expires ON filters (expires_at);
