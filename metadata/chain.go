package metadata

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"unicode/utf8"

	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
	"github.com/web3gate/web3gate/upstreams"
)

// Chain is what the metadata routes need of a chain's upstream pool.
type Chain interface {
	ForwardBatch(ctx context.Context, calls []upstreams.BatchCall) ([]upstreams.BatchResult, error)
}

// Token types as the API names them.
const (
	TypeERC20   = "ERC20"
	TypeERC721  = "ERC721"
	TypeERC1155 = "ERC1155"
	TypeUnknown = "UNKNOWN"
)

// ERC-165 interface ids.
var (
	ifaceERC165  = [4]byte{0x01, 0xff, 0xc9, 0xa7}
	ifaceInvalid = [4]byte{0xff, 0xff, 0xff, 0xff}
	ifaceERC721  = [4]byte{0x80, 0xac, 0x58, 0xcd}
	ifaceERC1155 = [4]byte{0xd9, 0xb6, 0x7a, 0x26}
)

// Function selectors of the calls the routes make.
var (
	selSupportsInterface = selector("supportsInterface(bytes4)")
	selTokenURI          = selector("tokenURI(uint256)")
	selURI               = selector("uri(uint256)")
	selOwnerOf           = selector("ownerOf(uint256)")
	selExists            = selector("exists(uint256)")
	selTotalSupplyOf     = selector("totalSupply(uint256)")
	selName              = selector("name()")
	selSymbol            = selector("symbol()")
	selDecimals          = selector("decimals()")
	selTotalSupply       = selector("totalSupply()")
	selBalanceOf         = selector("balanceOf(address)")
	selContractURI       = selector("contractURI()")
)

func selector(sig string) []byte { return crypto.Keccak256([]byte(sig))[:4] }

// word is one 32-byte ABI argument.
func word(v *big.Int) []byte { return common.LeftPadBytes(v.Bytes(), 32) }

// calls accumulates the eth_calls of one batch, all to one contract at the latest block.
type calls struct {
	to    common.Address
	batch []upstreams.BatchCall
}

// getCode adds eth_getCode of the contract and returns its index.
func (c *calls) getCode() int {
	params, _ := json.Marshal([]any{c.to, "latest"})
	c.batch = append(c.batch, upstreams.BatchCall{Method: "eth_getCode", Params: params})
	return len(c.batch) - 1
}

// call adds eth_call of sel with the 32-byte words args and returns its index.
func (c *calls) call(sel []byte, args ...[]byte) int {
	data := append([]byte(nil), sel...)
	for _, a := range args {
		data = append(data, a...)
	}
	params, _ := json.Marshal([]any{map[string]string{"to": strings.ToLower(c.to.Hex()), "data": "0x" + hex.EncodeToString(data)}, "latest"})
	c.batch = append(c.batch, upstreams.BatchCall{Method: "eth_call", Params: params})
	return len(c.batch) - 1
}

func (c *calls) supports(id [4]byte) int {
	return c.call(selSupportsInterface, common.RightPadBytes(id[:], 32))
}

// results are the answers of a batch.
type results []upstreams.BatchResult

// run sends the batch in one round trip.
func (c *calls) run(ctx context.Context, chain Chain) (results, error) {
	res, err := chain.ForwardBatch(ctx, c.batch)
	if err != nil {
		return nil, err
	}
	rs := results(res)
	// A call that failed for a reason other than the contract (a node's limit, an internal
	// error) fails the request: the answer would be a guess.
	for _, r := range rs {
		if r.Err != nil && !contractError(r.Err) {
			return nil, r.Err
		}
	}
	return rs, nil
}

// contractError reports whether an eth_call error is the contract's doing: a revert, an
// invalid opcode, running out of gas — what calling a function a contract lacks looks like.
func contractError(e *jsonrpc.Error) bool {
	if e.Code == 3 {
		return true
	}
	msg := strings.ToLower(e.Message)
	return e.Code == -32000 && (strings.Contains(msg, "revert") || strings.Contains(msg, "invalid opcode") ||
		strings.Contains(msg, "out of gas") || strings.Contains(msg, "execution") || strings.Contains(msg, "stack"))
}

// output is the decoded return data of call i; ok is false when the call failed or returned
// nothing.
func (rs results) output(i int) (out []byte, ok bool) {
	r := rs[i]
	if r.Err != nil {
		return nil, false
	}
	var s string
	if json.Unmarshal(r.Result, &s) != nil || !strings.HasPrefix(s, "0x") {
		return nil, false
	}
	out, err := hex.DecodeString(s[2:])
	if err != nil || len(out) == 0 {
		return nil, false
	}
	return out, true
}

// hasCode reports whether eth_getCode answer i shows code; err when the answer is malformed.
func (rs results) hasCode(i int) (bool, error) {
	if rs[i].Err != nil {
		return false, rs[i].Err
	}
	var s string
	if err := json.Unmarshal(rs[i].Result, &s); err != nil || !strings.HasPrefix(s, "0x") {
		return false, jsonrpc.ErrUpstreamUnavailable.With("eth_getCode answer is not hex data")
	}
	return len(s) > 2, nil
}

// bool decodes a bool return; ok is false unless the call returned exactly true or false.
func (rs results) bool(i int) (v, ok bool) {
	out, ok := rs.output(i)
	if !ok || len(out) < 32 || !allZero(out[:31]) || out[31] > 1 {
		return false, false
	}
	return out[31] == 1, true
}

// uint decodes a uint256 return.
func (rs results) uint(i int) (*big.Int, bool) {
	out, ok := rs.output(i)
	if !ok || len(out) < 32 {
		return nil, false
	}
	return new(big.Int).SetBytes(out[:32]), true
}

// address decodes an address return.
func (rs results) address(i int) (common.Address, bool) {
	out, ok := rs.output(i)
	if !ok || len(out) < 32 || !allZero(out[:12]) {
		return common.Address{}, false
	}
	return common.BytesToAddress(out[12:32]), true
}

var stringArgs = abi.Arguments{{Type: mustType("string")}}

func mustType(t string) abi.Type {
	typ, err := abi.NewType(t, "", nil)
	if err != nil {
		panic(err)
	}
	return typ
}

// string decodes a string return. Older contracts (MKR, SAI) return bytes32 for name and
// symbol: a 32-byte answer is read as text up to its first zero byte. Invalid UTF-8 is
// refused rather than passed on.
func (rs results) string(i int) (string, bool) {
	out, ok := rs.output(i)
	if !ok {
		return "", false
	}
	if len(out) == 32 {
		s := string(bytes.TrimRight(out, "\x00"))
		if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
			return "", false
		}
		return s, true
	}
	vals, err := stringArgs.Unpack(out)
	if err != nil || len(vals) != 1 {
		return "", false
	}
	s, _ := vals[0].(string)
	if !utf8.ValidString(s) {
		return "", false
	}
	return s, true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// probe is the part of every lookup's batch that tells what the address is: its code and
// its ERC-165 interfaces.
type probe struct{ code, i165, invalid, i721, i1155 int }

func (c *calls) probe() probe {
	return probe{code: c.getCode(), i165: c.supports(ifaceERC165), invalid: c.supports(ifaceInvalid),
		i721: c.supports(ifaceERC721), i1155: c.supports(ifaceERC1155)}
}

// standards reads a probe's answers: errNoContract when the address has no code; is165 when
// the contract implements ERC-165 as the standard says to detect it (supportsInterface
// 0x01ffc9a7 true, 0xffffffff not), and is721, is1155 only when it does.
func (rs results) standards(p probe) (is165, is721, is1155 bool, err error) {
	if has, err := rs.hasCode(p.code); err != nil {
		return false, false, false, err
	} else if !has {
		return false, false, false, errNoContract
	}
	if v, ok := rs.bool(p.i165); !ok || !v {
		return false, false, false, nil
	}
	if bad, ok := rs.bool(p.invalid); ok && bad {
		return false, false, false, nil
	}
	is721, _ = rs.bool(p.i721)
	is1155, _ = rs.bool(p.i1155)
	return true, is721, is1155, nil
}

// tokenReads is what the token route reads of the chain for one token.
type tokenReads struct {
	tokenType string // TypeERC721, TypeERC1155, or "" when the contract is neither
	exists    bool
	uri       string // as read, ERC1155 {id} substituted; "" when none
	hasURI    bool
}

// readToken reads in one batch whether the contract is an ERC721 or ERC1155 contract,
// whether token id exists, and its URI. errNoContract when the address has no code.
func readToken(ctx context.Context, chain Chain, addr common.Address, id *big.Int) (*tokenReads, error) {
	c := &calls{to: addr}
	pr := c.probe()
	idw := word(id)
	tokenURI, uri, ownerOf := c.call(selTokenURI, idw), c.call(selURI, idw), c.call(selOwnerOf, idw)
	exists, supply := c.call(selExists, idw), c.call(selTotalSupplyOf, idw)
	rs, err := c.run(ctx, chain)
	if err != nil {
		return nil, err
	}
	is165, is721, is1155, err := rs.standards(pr)
	if err != nil {
		return nil, err
	}
	t := &tokenReads{}
	owner, hasOwner := rs.address(ownerOf)
	switch {
	case is721, !is165 && hasOwner:
		// Contracts from before ERC-165 (CryptoKitties) answer ownerOf all the same.
		t.tokenType = TypeERC721
		t.exists = hasOwner && owner != (common.Address{})
		t.uri, t.hasURI = rs.string(tokenURI)
	case is1155:
		t.tokenType = TypeERC1155
		t.exists = true // unless the contract says otherwise (ERC1155Supply)
		if v, ok := rs.bool(exists); ok {
			t.exists = v
		} else if n, ok := rs.uint(supply); ok {
			t.exists = n.Sign() > 0
		}
		if t.uri, t.hasURI = rs.string(uri); t.hasURI {
			t.uri = strings.ReplaceAll(t.uri, "{id}", fmt.Sprintf("%064x", id))
		}
	}
	if t.hasURI && strings.TrimSpace(t.uri) == "" {
		t.uri, t.hasURI = "", false
	}
	return t, nil
}

// contractReads is what the contract route reads of the chain.
type contractReads struct {
	tokenType   string
	name        *string
	symbol      *string
	decimals    *uint8
	totalSupply *big.Int
	contractURI string // "" when none
}

// readContract reads in one batch the contract's standard and what the Contract object
// shows. errNoContract when the address has no code.
func readContract(ctx context.Context, chain Chain, addr common.Address) (*contractReads, error) {
	c := &calls{to: addr}
	pr := c.probe()
	name, symbol, decimals := c.call(selName), c.call(selSymbol), c.call(selDecimals)
	supply, balance := c.call(selTotalSupply), c.call(selBalanceOf, make([]byte, 32))
	contractURI := c.call(selContractURI)
	rs, err := c.run(ctx, chain)
	if err != nil {
		return nil, err
	}
	_, is721, is1155, err := rs.standards(pr)
	if err != nil {
		return nil, err
	}
	r := &contractReads{tokenType: TypeUnknown}
	dec, hasDec := rs.uint(decimals)
	total, hasTotal := rs.uint(supply)
	_, hasBalance := rs.uint(balance)
	switch {
	case is721:
		r.tokenType = TypeERC721
	case is1155:
		r.tokenType = TypeERC1155
	case hasDec && dec.IsUint64() && dec.Uint64() <= 255 && hasTotal && hasBalance:
		// ERC20 by behaviour: decimals, totalSupply and balanceOf(0x0) all answer. ERC721
		// contracts revert balanceOf(0x0), and have no decimals.
		r.tokenType = TypeERC20
		d := uint8(dec.Uint64())
		r.decimals = &d
	}
	if s, ok := rs.string(name); ok {
		r.name = &s
	}
	if s, ok := rs.string(symbol); ok {
		r.symbol = &s
	}
	if hasTotal {
		r.totalSupply = total
	}
	if s, ok := rs.string(contractURI); ok && strings.TrimSpace(s) != "" {
		r.contractURI = s
	}
	return r, nil
}
