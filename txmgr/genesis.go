package txmgr

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/store"
)

// A chain that started over: the node of a chain id now serves another chain than the one the
// stored nonces and transactions belong to (the embedded dev chain at every start, a dev node
// reset to a new genesis). Its block 0 tells: its hash is recorded per chain in the store, and
// compared once per process, before the chain's first reservation (Send, SignTransaction)
// and before its confirmer's recovery. When it differs, every stored transaction of the chain
// becomes abandoned (never sent again, not in flight, its nonce and idempotency key free) and
// the chain's nonce heads are dropped, so the next reservation of each account takes its
// nonce from the node again (store.AbandonChain). docs/signing.md, "A chain that started over".

// genesisGate is the genesis check of one chain in this process.
type genesisGate struct {
	sem  chan struct{} // held by the goroutine checking
	done atomic.Bool   // checked (or skipped: a node without block 0)

	// Under sem.
	fresh   bool // the chain started empty at this start: every stored row is an earlier chain's
	failing bool // the last attempt failed, and that was logged
	renewed bool // the chain started over (read after done)
}

func (t *Manager) genesisGate(chainID uint64) *genesisGate {
	if v, ok := t.genesis.Load(chainID); ok {
		return v.(*genesisGate)
	}
	v, _ := t.genesis.LoadOrStore(chainID, &genesisGate{sem: make(chan struct{}, 1)})
	return v.(*genesisGate)
}

// CheckGeneses checks the genesis of every chain, concurrently, and returns the chains that
// started over. Call it at start, before Run and before any request: fresh names the chains
// known to start empty at this start (the embedded dev chain), whose stored rows are an
// earlier chain's even when no genesis was recorded for them yet. A chain whose node cannot
// be read now (each read bounded by its pool's timeout and attempts) is checked again by its
// first send and by its confirmer, which recovers nothing of it before.
func (t *Manager) CheckGeneses(ctx context.Context, fresh []uint64) map[uint64]bool {
	for _, id := range fresh {
		if _, ok := t.chains[id]; ok {
			t.genesisGate(id).fresh = true
		}
	}
	var (
		mu      sync.Mutex
		renewed = map[uint64]bool{}
		wg      sync.WaitGroup
	)
	for id := range t.chains {
		wg.Go(func() {
			if t.awaitGenesis(ctx, id) != nil {
				return // logged; checked again later
			}
			if g := t.genesisGate(id); g.renewed {
				mu.Lock()
				renewed[id] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return renewed
}

// awaitGenesis returns once the genesis of chainID was checked in this process, checking it
// now when it was not: nil, or the error that kept it from being checked (the node's, or
// ctx's). Concurrent callers wait for the one checking.
func (t *Manager) awaitGenesis(ctx context.Context, chainID uint64) error {
	g := t.genesisGate(chainID)
	if g.done.Load() {
		return nil
	}
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-g.sem }()
	if g.done.Load() {
		return nil
	}
	log := t.log.With(zap.Uint64("chain", chainID))
	renewed, err := t.checkGenesis(ctx, chainID, g.fresh, log)
	if err != nil {
		if !g.failing && ctx.Err() == nil {
			log.Warn("the genesis block of the chain cannot be read: its nonces are handed out, and its stored transactions recovered, once it can",
				zap.Error(err))
			g.failing = true
		}
		return err
	}
	if g.failing {
		log.Info("the genesis block of the chain was read")
	}
	g.renewed = renewed
	g.done.Store(true)
	return nil
}

// checkGenesis reads block 0 of chainID, compares its hash with the recorded one and records
// it. When it changed, or the chain is fresh, the chain's stored transactions are abandoned
// and its nonce heads dropped, in the same store transaction. It reports whether the chain
// started over.
func (t *Manager) checkGenesis(ctx context.Context, chainID uint64, fresh bool, log *zap.Logger) (bool, error) {
	ch, ok := t.chains[chainID]
	if !ok {
		return false, jsonrpc.ErrUnknownChain.Withf("chain %d is not configured", chainID)
	}
	res, err := ch.Forward(ctx, "eth_getBlockByNumber", []byte(`["0x0",false]`))
	if err != nil {
		return false, err
	}
	if string(res) == "null" {
		// A node that does not serve block 0 cannot tell; refusing every send on the chain
		// for it would be worse than not checking.
		log.Warn("the node has no block 0: the genesis check of the chain is skipped until the next start")
		return false, nil
	}
	var b struct {
		Hash *common.Hash `json:"hash"`
	}
	if err := json.Unmarshal(res, &b); err != nil || b.Hash == nil {
		return false, jsonrpc.ErrUpstreamUnavailable.With("the node answered block 0 with something else")
	}
	hash := *b.Hash
	var (
		old       common.Hash
		had       bool
		abandoned int64
	)
	err = t.db.Write(ctx, func(tx *store.DBTx) error {
		// Replicas starting at once check one after the other: the second reads what the
		// first recorded, and does not abandon the rows the first has reserved since.
		if err := tx.LockChain(ctx, chainID); err != nil {
			return err
		}
		var err error
		if old, had, err = tx.ChainGenesis(ctx, chainID); err != nil {
			return err
		}
		if had && old == hash && !fresh {
			return nil
		}
		if had && old != hash || fresh {
			if abandoned, err = tx.AbandonChain(ctx, chainID, "its chain started over from the new genesis "+hash.Hex()); err != nil {
				return err
			}
		}
		return tx.RecordChainGenesis(ctx, chainID, hash)
	})
	if err != nil {
		return false, err
	}
	changed := had && old != hash
	if !changed && abandoned == 0 {
		return false, nil
	}
	// Nothing of the previous chain stays cached: nonce heads known to exist, its latest block.
	t.heads.Range(func(k, _ any) bool {
		if k.(headKey).chainID == chainID {
			t.heads.Delete(k)
		}
		return true
	})
	t.blocks.Delete(chainID)
	fields := []zap.Field{zap.Stringer("old_genesis", old), zap.Stringer("new_genesis", hash), zap.Int64("abandoned", abandoned)}
	if !had {
		fields[0] = zap.String("old_genesis", "not recorded")
	}
	switch {
	case fresh && abandoned > 0:
		// Expected at every start of the embedded dev chain: not a warning.
		log.Info("the dev chain started empty: the transactions of its previous run are abandoned, nonces start again from the chain", fields...)
	case !fresh:
		log.Warn("the chain started over from a new genesis: its stored transactions are abandoned, nonces start again from the chain", fields...)
	}
	return true, nil
}
