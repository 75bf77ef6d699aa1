-- Accounts the service holds and signs for, and the OAuth2 clients that obtain access tokens.
-- Times are RFC 3339 UTC with a fixed nine-digit fraction, so text order is time order.

CREATE TABLE accounts (
    address    TEXT PRIMARY KEY CHECK (length(address) = 42 AND address = lower(address)), -- lowercase 0x hex
    owner      TEXT NOT NULL CHECK (owner <> ''),  -- the principal the account belongs to
    source     TEXT NOT NULL,                      -- 'keystore' | 'dev'
    created_at TEXT NOT NULL
) STRICT;

CREATE INDEX accounts_owner ON accounts (owner, created_at, address);

CREATE TABLE oauth_clients (
    id          TEXT PRIMARY KEY CHECK (id <> ''),
    secret_hash TEXT NOT NULL,  -- argon2id or bcrypt encoding; never the secret
    principal   TEXT NOT NULL,
    scopes      TEXT NOT NULL,  -- space-separated, as in an OAuth2 scope parameter
    created_at  TEXT NOT NULL,
    disabled_at TEXT
) STRICT;
