-- Tokens minted per NFT contract, kept by the owners indexer (owners/) in the same write as
-- the balances it derives from the same logs, and rolled back with them on a reorg. The
-- product catalog reads it for "sold from the chain" (products/): a product whose contract is
-- indexed on its network counts these mints as totalSold.
--   ERC721:  tokens minted (Transfer from the zero address), burns not subtracted.
--   ERC1155: the sum of amounts minted (TransferSingle/TransferBatch from the zero address).
-- A contract without a row has minted nothing (yet) in the indexed range.

CREATE TABLE nft_minted (
    chain_id INTEGER NOT NULL,
    contract TEXT NOT NULL CHECK (length(contract) = 42 AND contract = lower(contract)),
    minted   INTEGER NOT NULL CHECK (minted >= 0), -- saturates at 2^63-1
    PRIMARY KEY (chain_id, contract)
) STRICT, WITHOUT ROWID;
