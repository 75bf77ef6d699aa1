package metadata

import (
	"math/big"
	"net/http"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy"
)

// TokenHandler serves GET /v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}.
func (s *Service) TokenHandler() proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		chainID, addr, force, err := commonParams(r)
		if err != nil {
			return nil, err
		}
		id, err := ParseTokenID(r.Params.Get("tokenId"))
		if err != nil {
			return nil, proxy.Errorf(http.StatusBadRequest, "tokenId: %v", err)
		}
		e, err := s.get(r.Ctx, item{chainID: chainID, addr: addr, id: id}, force)
		if err != nil {
			return nil, err
		}
		return &proxy.RESTResponse{Body: e.doc}, nil
	})
}

// ContractHandler serves GET /v1/tokens/{coinType}/{chainId}/{contractAddress}.
func (s *Service) ContractHandler() proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		chainID, addr, force, err := commonParams(r)
		if err != nil {
			return nil, err
		}
		e, err := s.get(r.Ctx, item{chainID: chainID, addr: addr}, force)
		if err != nil {
			return nil, err
		}
		return &proxy.RESTResponse{Body: e.doc}, nil
	})
}

// commonParams reads the path parameters and the query both routes share.
func commonParams(r *proxy.RESTRequest) (chainID uint64, addr common.Address, force bool, err error) {
	if ct := r.Params.Get("coinType"); ct != strconv.Itoa(CoinTypeEVM) {
		if _, perr := strconv.ParseUint(ct, 10, 32); perr != nil {
			return 0, addr, false, proxy.Errorf(http.StatusBadRequest, "coinType: must be a SLIP-44 integer")
		}
		return 0, addr, false, proxy.Errorf(http.StatusBadRequest, "coinType: only 60 (EVM chains) is supported")
	}
	chainID, perr := strconv.ParseUint(r.Params.Get("chainId"), 10, 64)
	if perr != nil || chainID == 0 {
		return 0, addr, false, proxy.Errorf(http.StatusBadRequest, "chainId: must be a positive decimal EIP-155 chain id")
	}
	if addr, perr = ParseAddress(r.Params.Get("contractAddress")); perr != nil {
		return 0, addr, false, proxy.Errorf(http.StatusBadRequest, "contractAddress: %v", perr)
	}
	if force, _, err = proxy.QueryBool(r, "forceRefresh"); err != nil {
		return 0, addr, false, err
	}
	return chainID, addr, force, nil
}

// ParseAddress reads a 0x-prefixed 20-byte hex address in any case; a mixed-case address
// must carry a valid EIP-55 checksum.
func ParseAddress(s string) (common.Address, error) {
	if len(s) != 42 || !strings.HasPrefix(s, "0x") && !strings.HasPrefix(s, "0X") || !common.IsHexAddress(s) {
		return common.Address{}, errAddressForm
	}
	a := common.HexToAddress(s)
	if mixedCase(s[2:]) && a.Hex()[2:] != s[2:] {
		return common.Address{}, errAddressChecksum
	}
	return a, nil
}

// mixedCase reports whether hex digits s have both lower- and upper-case letters.
func mixedCase(s string) bool {
	var lower, upper bool
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'f':
			lower = true
		case 'A' <= c && c <= 'F':
			upper = true
		}
	}
	return lower && upper
}

// ParseTokenID reads a token id in decimal or 0x-hex, at most 256 bits.
func ParseTokenID(s string) (*big.Int, error) {
	var (
		id *big.Int
		ok bool
	)
	switch {
	case s == "":
		return nil, errTokenIDForm
	case strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X"):
		if len(s) == 2 || len(s) > 2+64+64 { // leading zeros allowed, within reason
			return nil, errTokenIDForm
		}
		id, ok = new(big.Int).SetString(s[2:], 16)
	default:
		if len(s) > 78+64 {
			return nil, errTokenIDForm
		}
		id, ok = new(big.Int).SetString(s, 10)
	}
	switch {
	case !ok || id.Sign() < 0 || strings.ContainsAny(s, "+-_"):
		return nil, errTokenIDForm
	case id.BitLen() > 256:
		return nil, errTokenIDRange
	}
	return id, nil
}

type inputError string

func (e inputError) Error() string { return string(e) }

const (
	errAddressForm     = inputError("must be a 0x-prefixed 20-byte hex address")
	errAddressChecksum = inputError("mixed-case address with an invalid EIP-55 checksum")
	errTokenIDForm     = inputError("must be a decimal or 0x-hex integer")
	errTokenIDRange    = inputError("must be at most 2^256-1")
)
