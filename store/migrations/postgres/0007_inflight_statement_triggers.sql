-- The in-flight sums of 0001, kept with fewer writes of an account's one inflight row and
-- shorter locks on it. The sums and when a row counts (state reserved, signed, broadcast,
-- handed_out or, since 0005, stuck) do not change; SQLite keeps its per-row triggers.
--
-- Under a stream of sends from one account that row is the hottest of the database: every
-- reservation adds to it, every transaction the confirmer marks mined subtracts from it, and
-- a writer holds its lock until it commits.
--
-- - Insert: one trigger per statement instead of one per row. A group of reservations is one
--   INSERT of many rows (store.InsertTxs); its rows are now added to each account's row by one
--   upsert (a transition table), not by one upsert per row.
-- - Leaving flight (an update out of the states above, a delete): the subtraction is deferred
--   to the commit (a constraint trigger, INITIALLY DEFERRED). The confirmer marks a block's
--   transactions mined one statement each in one transaction; with the subtraction at each
--   statement it held the row's lock from its first statement to its commit, and the
--   reservations of both replicas waited for it (under the account's advisory lock). Now the
--   lock is taken at the commit only. Within the writing transaction the sums are higher
--   than its rows until it commits: the side of refusing a send, never of accepting one.
-- - Entering flight again (a reorg moves mined rows back to broadcast): as before, at once.

DROP TRIGGER txs_inflight_insert ON txs;
DROP TRIGGER txs_inflight_leave ON txs;
DROP TRIGGER txs_inflight_delete ON txs;

CREATE FUNCTION txs_inflight_add_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Accounts in key order: two statements adding to the same accounts lock their rows in
    -- one order.
    INSERT INTO inflight AS i (chain_id, address, n, c0, c1, c2, c3, c4, c5, c6, c7)
    SELECT chain_id, address, count(*), sum(cost0)::bigint, sum(cost1)::bigint, sum(cost2)::bigint,
           sum(cost3)::bigint, sum(cost4)::bigint, sum(cost5)::bigint, sum(cost6)::bigint, sum(cost7)::bigint
    FROM added
    WHERE state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
    GROUP BY chain_id, address
    ORDER BY chain_id, address
    ON CONFLICT (chain_id, address) DO UPDATE SET n = i.n + excluded.n,
        c0 = i.c0 + excluded.c0, c1 = i.c1 + excluded.c1, c2 = i.c2 + excluded.c2, c3 = i.c3 + excluded.c3,
        c4 = i.c4 + excluded.c4, c5 = i.c5 + excluded.c5, c6 = i.c6 + excluded.c6, c7 = i.c7 + excluded.c7;
    RETURN NULL;
END
$$;

CREATE TRIGGER txs_inflight_insert AFTER INSERT ON txs
REFERENCING NEW TABLE AS added FOR EACH STATEMENT
EXECUTE FUNCTION txs_inflight_add_rows();

CREATE CONSTRAINT TRIGGER txs_inflight_leave AFTER UPDATE OF state ON txs
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck')
  AND NEW.state NOT IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_sub();

CREATE CONSTRAINT TRIGGER txs_inflight_delete AFTER DELETE ON txs
DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
WHEN (OLD.state IN ('reserved', 'signed', 'broadcast', 'handed_out', 'stuck'))
EXECUTE FUNCTION txs_inflight_sub();
