-- "Sold from the chain" kept in the products rows, so that the list reads and filters one
-- column and sold=true walks the partial index of the sold-out products whatever the rule.
--
-- products_sold_scope is the catalog's view of the owners indexer's scope: the product
-- networks whose chain it follows, with every contract (contract '') or a list. The server
-- writes it at start (store.SetProductSoldScope, from owners.Config.Scope() and the network
-- names of upstreams) and then recomputes every product. A product whose network and contract
-- are in scope has chain_id set and sold = its contract's nft_minted.minted (0 without a row);
-- any other has chain_id NULL and sold = total_sold, the figure it was written with.
--
-- Triggers keep that true on every write, whoever writes: a product written (the import
-- command, the admin API) takes its chain_id and sold at once; a change of nft_minted (the
-- indexer's writes, its rollbacks, a chain's index dropped) moves the sold of the products
-- of that contract in the same transaction.

CREATE TABLE products_sold_scope (
    network  TEXT NOT NULL,
    chain_id INTEGER NOT NULL,
    contract TEXT NOT NULL CHECK (contract = '' OR length(contract) = 42 AND contract = lower(contract)),
    PRIMARY KEY (network, contract)
) STRICT, WITHOUT ROWID;

ALTER TABLE products ADD COLUMN chain_id INTEGER;
ALTER TABLE products ADD COLUMN sold INTEGER NOT NULL DEFAULT 0;
UPDATE products SET sold = total_sold;

-- The list's indexes carry sold rather than total_sold (see 0007).
DROP INDEX products_live;
DROP INDEX products_creator_live;
DROP INDEX products_sale_live;
DROP INDEX products_sold_live;
CREATE INDEX products_live ON products (live_at DESC, id, sales_end_at, creator, sale_type, sold,
    total_available);
CREATE INDEX products_creator_live ON products (creator, live_at DESC, id, sales_end_at, sale_type, sold,
    total_available);
CREATE INDEX products_sale_live ON products (sale_type, live_at DESC, id, sales_end_at, creator, sold,
    total_available);
CREATE INDEX products_sold_live ON products (live_at DESC, id, sales_end_at, creator, sale_type, sold,
    total_available) WHERE total_available IS NOT NULL AND sold >= total_available;
-- Nothing reads products by (network, token_contract) any more: the rule goes through chain_id.
DROP INDEX products_contract;
-- The products of one contract on one chain, for the nft_minted triggers.
CREATE INDEX products_chain_contract ON products (chain_id, token_contract) WHERE chain_id IS NOT NULL;

CREATE TRIGGER products_sold_on_insert AFTER INSERT ON products BEGIN
    UPDATE products SET chain_id = (SELECT s.chain_id FROM products_sold_scope s
            WHERE s.network = NEW.network AND s.contract IN ('', NEW.token_contract) LIMIT 1)
        WHERE id = NEW.id;
    UPDATE products SET sold = CASE WHEN chain_id IS NULL THEN total_sold
            ELSE COALESCE((SELECT m.minted FROM nft_minted m
                WHERE m.chain_id = products.chain_id AND m.contract = products.token_contract), 0) END
        WHERE id = NEW.id;
END;

CREATE TRIGGER products_sold_on_update AFTER UPDATE OF network, token_contract, total_sold ON products BEGIN
    UPDATE products SET chain_id = (SELECT s.chain_id FROM products_sold_scope s
            WHERE s.network = NEW.network AND s.contract IN ('', NEW.token_contract) LIMIT 1)
        WHERE id = NEW.id;
    UPDATE products SET sold = CASE WHEN chain_id IS NULL THEN total_sold
            ELSE COALESCE((SELECT m.minted FROM nft_minted m
                WHERE m.chain_id = products.chain_id AND m.contract = products.token_contract), 0) END
        WHERE id = NEW.id;
END;

CREATE TRIGGER products_sold_on_mint AFTER INSERT ON nft_minted BEGIN
    UPDATE products SET sold = NEW.minted WHERE chain_id = NEW.chain_id AND token_contract = NEW.contract;
END;

CREATE TRIGGER products_sold_on_mint_update AFTER UPDATE OF minted ON nft_minted BEGIN
    UPDATE products SET sold = NEW.minted WHERE chain_id = NEW.chain_id AND token_contract = NEW.contract;
END;

CREATE TRIGGER products_sold_on_mint_delete AFTER DELETE ON nft_minted BEGIN
    UPDATE products SET sold = 0 WHERE chain_id = OLD.chain_id AND token_contract = OLD.contract;
END;
