-- The leases table of SQLite's 0012, so that both schemas stay one. On PostgreSQL the leases
-- are advisory locks (lease/), and this table stays empty.

CREATE TABLE leases (
    name        text COLLATE "C" PRIMARY KEY CHECK (name <> ''),
    holder      text COLLATE "C" NOT NULL CHECK (holder <> ''),
    epoch       bigint NOT NULL CHECK (epoch > 0),
    expires_at  text COLLATE "C" NOT NULL,
    acquired_at text COLLATE "C" NOT NULL,
    renewed_at  text COLLATE "C" NOT NULL
);
