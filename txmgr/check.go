package txmgr

// Checking a request against the chain and the signing rules: gas, fee floor, funds, rules.

import (
	"context"
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// check runs the validation that needs the chain, in the API's order: gas (-32000), fee
// against the base fee (-32000), funds against the balance and the in-flight costs (-32000),
// then the signing rules (-32003). It returns the balance it read: funds are checked again
// against it, atomically, when the nonce is reserved.
//
// The fee is refused only when no next block could take it: below the lowest base fee the
// block after b can have (b's less 1/8, EIP-1559). web3gate is never stricter than the nodes
// behind it; a fee a node then refuses comes back with the node's words.
func (t *Manager) check(ctx context.Context, ch Chain, chainID uint64, b *blockInfo, r *txreq.Request) (*big.Int, error) {
	if err := txreq.CheckGas(r, b.gasLimit, t.cfg.GasCap); err != nil {
		return nil, err
	}
	if b.baseFee != nil {
		price := r.GasPrice
		name := "gasPrice"
		if r.Type() == types.DynamicFeeTxType {
			price, name = r.MaxFeePerGas, "maxFeePerGas"
		}
		if floor := minNextBaseFee(b); price.Cmp(floor) < 0 {
			return nil, ErrUnderpriced.Withf("transaction underpriced: %s %s is below %s, the lowest base fee the block after block %d (base fee %s) can have",
				name, price, floor, b.number, b.baseFee)
		}
	}
	balance, err := t.balance(ctx, ch, r.From)
	if err != nil {
		return nil, err
	}
	var n int
	var inflight *big.Int
	err = t.db.ReadOne(ctx, func(tx *store.DBTx) error {
		var err error
		n, inflight, err = tx.InFlight(ctx, chainID, r.From)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := funded(balance, r.MaxCost(), n, inflight); err != nil {
		return nil, err
	}
	return balance, t.checkRules(r)
}

// funded: balance (of the latest block) must cover cost plus every in-flight transaction's
// cost. Transactions mined since that block are counted twice until the confirmer has seen
// them, which errs on the side of refusing.
func funded(balance, cost *big.Int, n int, inflight *big.Int) error {
	need := new(big.Int).Add(cost, inflight)
	if balance.Cmp(need) < 0 {
		return ErrInsufficientFunds.WithData(map[string]string{
			"balance": hexutil.EncodeBig(balance), "required": hexutil.EncodeBig(need),
			"inFlight": fmt.Sprint(n),
		})
	}
	return nil
}

func (t *Manager) checkRules(r *txreq.Request) error {
	ru, ok := t.rules[r.From]
	if !ok {
		return nil
	}
	if r.To == nil && (ru.noCreate || ru.recipients != nil) {
		return ErrRule.Withf("transaction rejected by a signing rule: %s may not create contracts", r.From.Hex())
	}
	if ru.recipients != nil && !ru.recipients[*r.To] {
		return ErrRule.Withf("transaction rejected by a signing rule: %s may not send to %s", r.From.Hex(), r.To.Hex())
	}
	if ru.maxValue != nil && r.Value.Cmp(ru.maxValue) > 0 {
		return ErrRule.Withf("transaction rejected by a signing rule: value %s exceeds the maximum %s of %s",
			r.Value, ru.maxValue, r.From.Hex())
	}
	return nil
}
