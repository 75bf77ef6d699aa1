package txreq

import (
	"net/http"

	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/params"
	"github.com/holiman/uint256"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

// ErrGas is the -32000 error of a gas limit the chain would refuse; CheckGas derives its
// errors from it with the reason, and callers branch with errors.Is(err, txreq.ErrGas).
var ErrGas = &jsonrpc.Error{Code: -32000, Message: "invalid gas limit", HTTPStatus: http.StatusOK}

// latestRules are the rules CheckGas prices under: Homestead (creation cost), Istanbul
// (EIP-2028 calldata), Shanghai (EIP-3860 init code words) and Prague (the EIP-7623 calldata
// floor). Amsterdam's repricing is not live on any chain yet.
func latestRules() params.Rules {
	return params.Rules{IsHomestead: true, IsIstanbul: true, IsShanghai: true, IsPrague: true}
}

// CheckGas checks r.Gas against what the chain needs and allows, in this order: at least the
// intrinsic gas of the data, access list and recipient (core.IntrinsicGas), at least the
// EIP-7623 floor data gas (core.FloorDataGas), at most blockGasLimit, and at most capGas unless
// capGas is 0 (no cap). Each failure is ErrGas with its reason; numbers are decimal, as in
// go-ethereum's own messages.
func CheckGas(r *Request, blockGasLimit, capGas uint64) error {
	latest := latestRules()
	value, overflow := uint256.FromBig(orZero(r.Value))
	if overflow {
		value = new(uint256.Int).SetAllOne() // Parse never lets this through
	}
	intrinsic, err := core.IntrinsicGas(r.Data, r.AccessList, nil, r.From, r.To, value, latest)
	if err != nil {
		return ErrGas.Withf("intrinsic gas too low: have %d, want more than fits 64 bits", r.Gas)
	}
	if r.Gas < intrinsic {
		return ErrGas.Withf("intrinsic gas too low: have %d, want %d", r.Gas, intrinsic)
	}
	floor, err := core.FloorDataGas(latest, r.From, r.To, value, r.Data, r.AccessList)
	if err != nil {
		return ErrGas.Withf("insufficient gas for floor data gas cost: have %d, want more than fits 64 bits", r.Gas)
	}
	if r.Gas < floor {
		return ErrGas.Withf("insufficient gas for floor data gas cost: have %d, want %d", r.Gas, floor)
	}
	if r.Gas > blockGasLimit {
		return ErrGas.Withf("gas %d exceeds block gas limit %d", r.Gas, blockGasLimit)
	}
	if capGas != 0 && r.Gas > capGas {
		return ErrGas.Withf("gas %d exceeds the configured cap %d", r.Gas, capGas)
	}
	return nil
}
