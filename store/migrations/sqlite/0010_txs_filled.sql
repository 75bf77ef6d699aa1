-- What a client asked for and what web3gate filled in: eth_sendTransaction and
-- eth_signTransaction accept transaction objects with fields left out (gas, fees, value,
-- data), which web3gate fills. `fields` stays the complete object that is signed; `request` is
-- the object as the client sent it (canonical JSON), which an Idempotency-Key is compared
-- with, and `filled` the names of the fields web3gate supplied, comma-separated.
ALTER TABLE txs ADD COLUMN request TEXT;
ALTER TABLE txs ADD COLUMN filled TEXT;
