-- Encrypted private keys kept in the store (wallet.keys.backend: store), so that every
-- process sharing the store can sign for every account: each row is a go-ethereum V3 key file
-- (JSON), encrypted with the keystore passphrase exactly as a file of the keystore directory.
-- The store never holds a key in clear. A plain table, with nothing SQLite-only, so that it
-- ports as it is.

CREATE TABLE account_keys (
    address    TEXT PRIMARY KEY CHECK (length(address) = 42 AND address = lower(address)), -- lowercase 0x hex
    key_json   TEXT NOT NULL CHECK (key_json <> ''),
    created_at TEXT NOT NULL
);
