-- The NFT owners index (owners/): who holds which ERC721 and ERC1155 tokens, derived from the
-- Transfer, TransferSingle and TransferBatch logs of each indexed chain, with what it takes to
-- follow the chain: how far each chain is indexed, the hashes of its recent blocks (a reorg
-- shows as a parent hash that no longer matches) and the before-images of every change made
-- by those blocks, so that a reorg rolls them back exactly. nft_minted (0005) is kept in the
-- same transactions.
--
-- Encodings: addresses are their 20 bytes; token ids and amounts (uint256) are one length
-- byte followed by the value's big-endian bytes without leading zeros (0 is x'00'), so that
-- byte order is numeric order.

-- How far each chain is indexed: the last block whose logs are applied, and its hash. scope
-- is the configuration the index was built with (start block and contracts): an index built
-- for another scope is dropped and rebuilt.
CREATE TABLE nft_index_progress (
    chain_id     INTEGER PRIMARY KEY,
    scope        TEXT NOT NULL,
    block_number INTEGER NOT NULL CHECK (block_number >= 0),
    block_hash   BLOB NOT NULL CHECK (length(block_hash) = 32),
    updated_at   TEXT NOT NULL
) STRICT;

-- Hashes of indexed blocks: every block near the chain's head when it was indexed (undo = 1:
-- its changes are in nft_undo, complete) and the last block of each batch. Rows more than the
-- reorg depth below the indexed block are pruned.
CREATE TABLE nft_index_blocks (
    chain_id     INTEGER NOT NULL,
    block_number INTEGER NOT NULL,
    block_hash   BLOB NOT NULL CHECK (length(block_hash) = 32),
    undo         INTEGER NOT NULL CHECK (undo IN (0, 1)),
    PRIMARY KEY (chain_id, block_number)
) STRICT, WITHOUT ROWID;

-- One row per (owner, contract, token) with a non-zero amount: 1 for an ERC721 token (its
-- owner), the balance for an ERC1155 one.
CREATE TABLE nft_balances (
    chain_id INTEGER NOT NULL,
    contract BLOB NOT NULL CHECK (length(contract) = 20),
    token_id BLOB NOT NULL CHECK (length(token_id) BETWEEN 1 AND 33),
    owner    BLOB NOT NULL CHECK (length(owner) = 20),
    amount   BLOB NOT NULL CHECK (length(amount) BETWEEN 2 AND 33),
    standard INTEGER NOT NULL CHECK (standard IN (721, 1155)),
    PRIMARY KEY (chain_id, contract, token_id, owner)
) STRICT, WITHOUT ROWID;

-- Before-images of the changes made by the blocks of nft_index_blocks with undo = 1, in the
-- order made (seq within the block); a rollback restores them newest first. kind 1: the owner
-- of an ERC721 token (owner NULL: none); kind 2: an ERC1155 balance (amount NULL: none); kind
-- 3: a contract's nft_minted count (minted NULL: no row).
CREATE TABLE nft_undo (
    chain_id     INTEGER NOT NULL,
    block_number INTEGER NOT NULL,
    seq          INTEGER NOT NULL,
    kind         INTEGER NOT NULL CHECK (kind IN (1, 2, 3)),
    contract     BLOB NOT NULL CHECK (length(contract) = 20),
    token_id     BLOB,
    owner        BLOB,
    amount       BLOB,
    minted       INTEGER,
    PRIMARY KEY (chain_id, block_number, seq)
) STRICT, WITHOUT ROWID;
