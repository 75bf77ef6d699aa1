-- The list of products (products/, store/products.go) walks one index in its order, live_at
-- descending, then id: products_creator_live with a creator, products_sale_live with one sale
-- type, products_sold_live for sold=true under the stored rule, products_live otherwise. Each
-- now carries every column the list filters on, so that the rows a filter or an offset skips
-- are judged on the index alone and only the bodies of the rows returned are read from the
-- table (SQLite's deferred seek). With the indexes of 0004 an offset of 10,000 read 10,000
-- table rows: 50 ms at 100,000 products, 1.5 ms with these.
DROP INDEX products_live;
DROP INDEX products_creator_live;
DROP INDEX products_sale_live;
CREATE INDEX products_live ON products (live_at DESC, id, sales_end_at, creator, sale_type, total_sold,
    total_available, network, token_contract);
CREATE INDEX products_creator_live ON products (creator, live_at DESC, id, sales_end_at, sale_type, total_sold,
    total_available, network, token_contract);
CREATE INDEX products_sale_live ON products (sale_type, live_at DESC, id, sales_end_at, creator, total_sold,
    total_available, network, token_contract);
-- The sold-out products alone: sold=true walks them rather than every product. Its WHERE is
-- the list's condition term for term (SQLite uses a partial index only when the query's WHERE
-- implies it); under the chain rule the condition differs and the list walks products_live.
CREATE INDEX products_sold_live ON products (live_at DESC, id, sales_end_at, creator, sale_type, total_sold,
    total_available, network, token_contract) WHERE total_available IS NOT NULL AND total_sold >= total_available;
