package txmgr

// The fees of a new version: raised by the replacement rule and capped, or a caller's, checked.

import (
	"fmt"
	"math/big"

	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"

	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/txmgr/txreq"
)

// raise is v raised by bp basis points, rounded up.
func raise(v *big.Int, bp int64) *big.Int {
	r := new(big.Int).Mul(v, big.NewInt(10000+bp))
	r.Add(r, big.NewInt(9999))
	return r.Quo(r, big.NewInt(10000))
}

func maxBig(a, b *big.Int) *big.Int {
	if a == nil {
		return b
	}
	if b == nil || a.Cmp(b) >= 0 {
		return a
	}
	return b
}

// newFees computes the fees of the next version of a request whose highest fees so far are
// in hi (a request of its type), for the chain's base fee (nil before London): tip and fee cap
// (or gasPrice) each raised by the replacement rule, the fee cap at least twice the base fee
// plus the tip (as filling computes it). Above maxFeeCap the fee cap is held at the cap when
// the replacement rule allows that and the base fee does not exceed it; else errBumpCap.
func newFees(hi *txreq.Request, baseFee *big.Int, br bumpRules) (*ReplaceFees, error) {
	if hi.Type() == types.DynamicFeeTxType {
		tip := raise(hi.MaxPriorityFeePerGas, br.basisPoints)
		minCap := raise(hi.MaxFeePerGas, br.basisPoints)
		feeCap := minCap
		if baseFee != nil {
			feeCap = maxBig(feeCap, new(big.Int).Add(new(big.Int).Mul(baseFee, big.NewInt(2)), tip))
		}
		if br.maxFeeCap != nil && feeCap.Cmp(br.maxFeeCap) > 0 {
			if minCap.Cmp(br.maxFeeCap) > 0 || tip.Cmp(br.maxFeeCap) > 0 {
				return nil, fmt.Errorf("%w: the next bump needs maxFeePerGas %s, above maxFeeCap %s", errBumpCap, minCap, br.maxFeeCap)
			}
			if baseFee != nil && br.maxFeeCap.Cmp(new(big.Int).Add(baseFee, tip)) < 0 {
				return nil, fmt.Errorf("%w: the base fee %s and tip %s need more than maxFeeCap %s", errBumpCap, baseFee, tip, br.maxFeeCap)
			}
			feeCap = br.maxFeeCap
		}
		return &ReplaceFees{MaxFeePerGas: feeCap, MaxPriorityFeePerGas: tip}, nil
	}
	minPrice := raise(hi.GasPrice, br.basisPoints)
	price := minPrice
	if baseFee != nil {
		price = maxBig(price, new(big.Int).Mul(baseFee, big.NewInt(2)))
	}
	if br.maxFeeCap != nil && price.Cmp(br.maxFeeCap) > 0 {
		if minPrice.Cmp(br.maxFeeCap) > 0 || baseFee != nil && br.maxFeeCap.Cmp(baseFee) < 0 {
			return nil, fmt.Errorf("%w: the next bump needs gasPrice %s, above maxFeeCap %s", errBumpCap, maxBig(minPrice, baseFee), br.maxFeeCap)
		}
		price = br.maxFeeCap
	}
	return &ReplaceFees{GasPrice: price}, nil
}

// checkExplicit checks a caller's fees against the replacement rule over hi and the caps.
func checkExplicit(f *ReplaceFees, hi *txreq.Request, br bumpRules) error {
	pct := fmt.Sprintf("%g %%", float64(br.basisPoints)/100)
	if hi.Type() == types.DynamicFeeTxType {
		if f.GasPrice != nil || f.MaxFeePerGas == nil || f.MaxPriorityFeePerGas == nil {
			return ErrReplacementUnderpriced.With("the transaction is of type 2: give maxFeePerGas and maxPriorityFeePerGas (or no fees, for the bump rules)")
		}
		minTip, minCap := raise(hi.MaxPriorityFeePerGas, br.basisPoints), raise(hi.MaxFeePerGas, br.basisPoints)
		if f.MaxPriorityFeePerGas.Cmp(minTip) < 0 || f.MaxFeePerGas.Cmp(minCap) < 0 {
			return ErrReplacementUnderpriced.Withf("fees below the replacement rule (+%s over the highest version): maxFeePerGas must be at least %s and maxPriorityFeePerGas at least %s",
				pct, hexutil.EncodeBig(minCap), hexutil.EncodeBig(minTip))
		}
		if f.MaxPriorityFeePerGas.Cmp(f.MaxFeePerGas) > 0 {
			return ErrReplacementUnderpriced.With("maxPriorityFeePerGas must not exceed maxFeePerGas")
		}
		if br.maxFeeCap != nil && f.MaxFeePerGas.Cmp(br.maxFeeCap) > 0 {
			return ErrFeeCap.Withf("maxFeePerGas %s is above wallet.transactions.bump.maxFeeCap %s", hexutil.EncodeBig(f.MaxFeePerGas), hexutil.EncodeBig(br.maxFeeCap))
		}
		return nil
	}
	if f.GasPrice == nil || f.MaxFeePerGas != nil || f.MaxPriorityFeePerGas != nil {
		return ErrReplacementUnderpriced.With("the transaction is a legacy one: give gasPrice (or no fees, for the bump rules)")
	}
	if minPrice := raise(hi.GasPrice, br.basisPoints); f.GasPrice.Cmp(minPrice) < 0 {
		return ErrReplacementUnderpriced.Withf("fees below the replacement rule (+%s over the highest version): gasPrice must be at least %s", pct, hexutil.EncodeBig(minPrice))
	}
	if br.maxFeeCap != nil && f.GasPrice.Cmp(br.maxFeeCap) > 0 {
		return ErrFeeCap.Withf("gasPrice %s is above wallet.transactions.bump.maxFeeCap %s", hexutil.EncodeBig(f.GasPrice), hexutil.EncodeBig(br.maxFeeCap))
	}
	return nil
}

// highest is the original request of rec with the highest tip and fee cap (or gasPrice) of
// any of its versions.
func highest(rec *store.TxRecord, vs []*store.TxVersion) (*txreq.Request, error) {
	orig, err := parseFields(rec.Fields, rec.ChainID)
	if err != nil {
		return nil, fmt.Errorf("stored fields of tx %d: %w", rec.ID, err)
	}
	hi := *orig
	for _, v := range vs {
		r, err := parseFields(v.Fields, rec.ChainID)
		if err != nil {
			return nil, fmt.Errorf("stored fields of tx %d version %d: %w", rec.ID, v.Seq, err)
		}
		hi.GasPrice = maxBig(hi.GasPrice, r.GasPrice)
		hi.MaxFeePerGas = maxBig(hi.MaxFeePerGas, r.MaxFeePerGas)
		hi.MaxPriorityFeePerGas = maxBig(hi.MaxPriorityFeePerGas, r.MaxPriorityFeePerGas)
	}
	return &hi, nil
}
