// Package txmgr is the nonce manager: it serves eth_sendTransaction and eth_signTransaction
// for the accounts the service holds, and follows every transaction it sent until it is
// final. Manager (manager.go) is built by New from Config, the wallet.transactions section of
// the configuration (config.go, bumpconfig.go), and Deps: the keys (package wallet, which
// signs), the store, and each chain's upstream pool. docs/signing.md describes the states of
// a transaction and why each step is where it is.
//
// The life of a send (send.go; the request is a txreq.Request, txreq/):
//
//  1. check: the fields the client left out are filled as geth fills them (fill.go), then the
//     request is checked against the chain's latest block (chainread.go) and the signing
//     rules: gas, fee floor, funds counting the account's transactions in flight (check.go);
//  2. reserve: the nonce is taken and the transaction recorded in one store transaction, the
//     in-flight cap and the funds checked again inside it (reserve.go; on PostgreSQL grouped
//     per account, reserve_group.go). A send beyond the cap waits for a slot (slots.go). No
//     nonce of a chain is handed out before its genesis block was checked (genesis.go);
//  3. sign: outside any lock, and the signed bytes are persisted before anything is sent
//     (sign.go);
//  4. broadcast: the bytes are sent until a node accepts them, and their hash is the answer
//     (broadcast.go). A node saying "nonce too low" is reconciled (reconcile.go); a
//     transaction a node refuses fails without leaving its nonce a gap (gap.go).
//
// A send repeated with the same Idempotency-Key gets the first one's hash (idempotency.go),
// and Transaction finds a request by any of its hashes (status.go). eth_signTransaction
// (SignTransaction) goes through steps 1 to 3 and hands the bytes out, the nonce held for the
// caller for a while.
//
// Then a confirmer per chain (confirmer.go, started by Run) takes over: it recovers what a
// crash interrupted, finishes stale rows and rebroadcasts (confirmer_recover.go); follows the
// blocks, marking transactions mined, moving them back on a reorg and confirming them
// FinalityDepth blocks deep (confirmer_blocks.go); checks the receipt of each mined one and
// fails one that reverted, with its reason (revert.go); and ends unused hand-outs
// (confirmer_expire.go). A transaction the chain has priced out is bumped: signed again at
// its nonce with raised fees, as a new version of the same request (bump.go, bump_fees.go,
// versions.go); a caller speeds one up or cancels it with Replace (replace.go). metrics.go
// counts these outcomes.
package txmgr
