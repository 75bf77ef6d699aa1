-- The filters table of SQLite's 0013 (HTTP filters, whose state any replica reads), so that
-- both schemas stay one. The comments of the SQLite file say what each column is for.

CREATE TABLE filters (
    id            text COLLATE "C" PRIMARY KEY CHECK (length(id) = 34 AND id = lower(id)),
    chain_id      bigint NOT NULL,
    owner         text COLLATE "C" NOT NULL CHECK (owner <> ''),
    kind          text COLLATE "C" NOT NULL CHECK (kind IN ('logs', 'blocks')),
    criteria      text COLLATE "C",
    cursor_number bigint NOT NULL CHECK (cursor_number >= 0),
    cursor_hash   text COLLATE "C" NOT NULL CHECK (length(cursor_hash) = 66 AND cursor_hash = lower(cursor_hash)),
    seq           bigint NOT NULL CHECK (seq >= 0),
    dropped       text COLLATE "C",
    created_at    text COLLATE "C" NOT NULL,
    expires_at    text COLLATE "C" NOT NULL
);
CREATE INDEX filters_owner ON filters (owner, expires_at);
CREATE INDEX filters_expires ON filters (expires_at);
