-- Token and contract metadata records (metadata/): the answer of a /v1/tokens route as last
-- fetched, with when it was fetched and how many fetches in a row failed.

CREATE TABLE metadata_records (
    chain_id   INTEGER NOT NULL,
    address    TEXT NOT NULL CHECK (length(address) = 42 AND address = lower(address)),
    token_id   TEXT NOT NULL,  -- 0x-hex lowercase without leading zeros; '' for the contract
    body       BLOB NOT NULL,  -- the Token or Contract object as served (JSON)
    failures   INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0), -- fetches in a row whose document could not be had
    updated_at TEXT NOT NULL,  -- the time of the last fetch
    PRIMARY KEY (chain_id, address, token_id)
) STRICT, WITHOUT ROWID;
