-- The product catalog (products/): the Product object as JSON, with the columns its filters
-- and its order need. Times are RFC 3339 UTC with a fixed nine-digit fraction (text order is
-- time order).

CREATE TABLE products (
    id              TEXT PRIMARY KEY CHECK (length(id) = 36),
    network         TEXT NOT NULL,
    token_contract  TEXT NOT NULL CHECK (length(token_contract) = 42 AND token_contract = lower(token_contract)),
    creator         TEXT,            -- lower(username); NULL when none
    sale_type       TEXT NOT NULL CHECK (sale_type IN ('LIMITED_EDITION', 'OPEN_EDITION', 'OFF_CHAIN_AUCTION', 'ON_CHAIN_AUCTION')),
    total_sold      INTEGER NOT NULL CHECK (total_sold >= 0),
    total_available INTEGER CHECK (total_available >= 0), -- NULL: unlimited
    live_at         TEXT,            -- NULL: not scheduled (never live)
    sales_end_at    TEXT,
    created_at      TEXT NOT NULL,
    body            BLOB NOT NULL    -- the Product object, JSON
) STRICT;

-- The list walks live_at descending, then id; each filter narrows it.
CREATE INDEX products_live ON products (live_at DESC, id);
CREATE INDEX products_creator_live ON products (creator, live_at DESC, id);
CREATE INDEX products_sale_live ON products (sale_type, live_at DESC, id);
CREATE INDEX products_contract ON products (network, token_contract);
