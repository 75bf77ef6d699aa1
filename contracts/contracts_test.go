package contracts

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/rpc"
	"github.com/web3gate/web3gate/devchain"
	"github.com/web3gate/web3gate/devchain/devchaintest"
)

// Interface ids (ERC-165).
var (
	idERC165           = [4]byte{0x01, 0xff, 0xc9, 0xa7}
	idERC721           = [4]byte{0x80, 0xac, 0x58, 0xcd}
	idERC721Metadata   = [4]byte{0x5b, 0x5e, 0x13, 0x9f}
	idERC721Enumerable = [4]byte{0x78, 0x0e, 0x9d, 0x63}
	idERC1155          = [4]byte{0xd9, 0xb6, 0x7a, 0x26}
	idERC1155Metadata  = [4]byte{0x0e, 0x89, 0x34, 0x1c}
	idInvalid          = [4]byte{0xff, 0xff, 0xff, 0xff}
)

func TestArtifactsLoad(t *testing.T) {
	want := []string{"Multicall", "OnChainERC721", "Plain", "TestERC1155", "TestERC20", "TestERC721", "TransferEmitter"}
	if got := names(); strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("embedded artifacts = %v, want %v", got, want)
	}
	for _, name := range want {
		c, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != name || len(c.Bytecode) == 0 || len(c.ABI.Methods) == 0 {
			t.Errorf("%s: name %q, %d bytes of bytecode, %d methods", name, c.Name, len(c.Bytecode), len(c.ABI.Methods))
		}
	}
	// A canonical signature selects an overload.
	data, err := MustLoad("TestERC1155").Calldata("totalSupply(uint256)", big.NewInt(1))
	if want := crypto.Keccak256([]byte("totalSupply(uint256)"))[:4]; err != nil || len(data) != 36 || !bytes.Equal(data[:4], want) {
		t.Errorf("Calldata(totalSupply(uint256)) = %x, %v; want the selector %x and one word", data, err, want)
	}
	if _, err := Load("Nope"); err == nil || !strings.Contains(err.Error(), "TestERC721") {
		t.Errorf("Load(Nope) = %v, want an error listing the artifacts", err)
	}
}

// TestContractsOnDevChain deploys every contract on the embedded dev chain and exercises
// what the metadata and owners tests rely on.
func TestContractsOnDevChain(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, other := startSession(t)
	h := &harness{ctx: ctx, s: s}

	erc721, erc1155, erc20 := MustLoad("TestERC721"), MustLoad("TestERC1155"), MustLoad("TestERC20")
	onChain, plain := MustLoad("OnChainERC721"), MustLoad("Plain")
	me := crypto.PubkeyToAddress(s.Key.PublicKey)

	t.Run("TestERC721", func(t *testing.T) {
		nft := h.deploy(t, erc721, "Test NFT", "TNFT")
		h.transact(t, nft, erc721, "mint", me, big.NewInt(7))
		h.transact(t, nft, erc721, "setTokenURI", big.NewInt(7), "ipfs://token/7")
		h.transact(t, nft, erc721, "setContractURI", "https://example.test/collection.json")
		h.check(t, "name", h.call(t, nft, erc721, "name"), "Test NFT")
		h.check(t, "symbol", h.call(t, nft, erc721, "symbol"), "TNFT")
		h.check(t, "tokenURI(7)", h.call(t, nft, erc721, "tokenURI", big.NewInt(7)), "ipfs://token/7")
		h.check(t, "ownerOf(7)", h.call(t, nft, erc721, "ownerOf", big.NewInt(7)), me)
		h.check(t, "totalSupply", h.call(t, nft, erc721, "totalSupply"), big.NewInt(1))
		h.check(t, "contractURI", h.call(t, nft, erc721, "contractURI"), "https://example.test/collection.json")
		for id, want := range map[[4]byte]bool{idERC165: true, idERC721: true, idERC721Metadata: true,
			idERC721Enumerable: true, idERC1155: false, idInvalid: false} {
			h.check(t, hexutil.Encode(id[:]), h.call(t, nft, erc721, "supportsInterface", id), want)
		}
		// Only the owner or an approved operator burns.
		stranger := &Session{Client: s.Client, Key: other.Key, ChainID: s.ChainID}
		if _, err := stranger.Transact(ctx, nft, erc721, "burn", big.NewInt(7)); err == nil ||
			!strings.Contains(err.Error(), "ERC721InsufficientApproval(") {
			t.Errorf("a stranger's burn of token 7: %v, want ERC721InsufficientApproval", err)
		}
		h.transact(t, nft, erc721, "burn", big.NewInt(7))
		h.check(t, "totalSupply after burn", h.call(t, nft, erc721, "totalSupply"), big.NewInt(0))
		wantRevert(t, erc721, "ERC721NonexistentToken")(s.Call(ctx, nft, erc721, "ownerOf", big.NewInt(7)))
	})

	t.Run("TestERC1155", func(t *testing.T) {
		multi := h.deploy(t, erc1155, "Test Multi", "TMT", "https://example.test/{id}.json")
		ids := []*big.Int{big.NewInt(1), big.NewInt(2)}
		h.transact(t, multi, erc1155, "mintBatch", me, ids, []*big.Int{big.NewInt(10), big.NewInt(20)})
		h.transact(t, multi, erc1155, "mint", other.Address, big.NewInt(2), big.NewInt(5))
		h.check(t, "balanceOf(me, 1)", h.call(t, multi, erc1155, "balanceOf", me, big.NewInt(1)), big.NewInt(10))
		h.check(t, "balanceOf(me, 2)", h.call(t, multi, erc1155, "balanceOf", me, big.NewInt(2)), big.NewInt(20))
		h.check(t, "totalSupply(2)", h.call(t, multi, erc1155, "totalSupply(uint256)", big.NewInt(2)), big.NewInt(25))
		h.check(t, "uri(1)", h.call(t, multi, erc1155, "uri", big.NewInt(1)), "https://example.test/{id}.json")
		h.check(t, "exists(1)", h.call(t, multi, erc1155, "exists", big.NewInt(1)), true)
		h.check(t, "exists(3)", h.call(t, multi, erc1155, "exists", big.NewInt(3)), false)
		h.check(t, "name", h.call(t, multi, erc1155, "name"), "Test Multi")
		h.check(t, "symbol", h.call(t, multi, erc1155, "symbol"), "TMT")
		h.check(t, "supportsInterface(ERC1155)", h.call(t, multi, erc1155, "supportsInterface", idERC1155), true)
		h.check(t, "supportsInterface(ERC1155Metadata)", h.call(t, multi, erc1155, "supportsInterface", idERC1155Metadata), true)
		h.check(t, "supportsInterface(ERC721)", h.call(t, multi, erc1155, "supportsInterface", idERC721), false)
		// burn needs the holder or an approved operator.
		if _, err := s.Transact(ctx, multi, erc1155, "burn", other.Address, big.NewInt(2), big.NewInt(5)); err == nil ||
			!strings.Contains(err.Error(), "ERC1155MissingApprovalForAll(") {
			t.Errorf("burn of another holder's tokens: %v, want ERC1155MissingApprovalForAll", err)
		}
		h.transact(t, multi, erc1155, "burnBatch", me, ids, []*big.Int{big.NewInt(10), big.NewInt(1)})
		h.check(t, "exists(1) after burn", h.call(t, multi, erc1155, "exists", big.NewInt(1)), false)
		h.check(t, "totalSupply(2) after burn", h.call(t, multi, erc1155, "totalSupply(uint256)", big.NewInt(2)), big.NewInt(24))
		h.transact(t, multi, erc1155, "setURI", "ipfs://multi/{id}")
		h.check(t, "uri(2) after setURI", h.call(t, multi, erc1155, "uri", big.NewInt(2)), "ipfs://multi/{id}")
	})

	t.Run("TestERC20", func(t *testing.T) {
		token := h.deploy(t, erc20, "Test Token", "TTK", uint8(6))
		h.transact(t, token, erc20, "mint", me, big.NewInt(1_000_000))
		h.check(t, "name", h.call(t, token, erc20, "name"), "Test Token")
		h.check(t, "symbol", h.call(t, token, erc20, "symbol"), "TTK")
		h.check(t, "decimals", h.call(t, token, erc20, "decimals"), uint8(6))
		h.check(t, "totalSupply", h.call(t, token, erc20, "totalSupply"), big.NewInt(1_000_000))
		h.check(t, "balanceOf(me)", h.call(t, token, erc20, "balanceOf", me), big.NewInt(1_000_000))
	})

	t.Run("Multicall", func(t *testing.T) {
		mc := MustLoad("Multicall")
		token := h.deploy(t, erc20, "Test Token", "TTK", uint8(6))
		agg := h.deploy(t, mc)
		h.transact(t, token, erc20, "mint", agg, big.NewInt(10))
		to := []common.Address{common.HexToAddress("0x2001"), common.HexToAddress("0x2002"), common.HexToAddress("0x2003")}
		calls := make([][]byte, len(to))
		for i, a := range to {
			data, err := erc20.Calldata("transfer", a, big.NewInt(int64(i+1)))
			if err != nil {
				t.Fatal(err)
			}
			calls[i] = data
		}
		r, err := s.Transact(ctx, agg, mc, "aggregate", token, calls)
		if err != nil {
			t.Fatal(err)
		}
		// One ERC-20 Transfer per call, from the token, in the order of the calls.
		if len(r.Logs) != len(to) {
			t.Fatalf("aggregate: %d logs, want %d", len(r.Logs), len(to))
		}
		for i, l := range r.Logs {
			want := []common.Hash{erc20.ABI.Events["Transfer"].ID, common.BytesToHash(agg.Bytes()), common.BytesToHash(to[i].Bytes())}
			if l.Address != token || !slices.Equal(l.Topics, want) || new(big.Int).SetBytes(l.Data).Int64() != int64(i+1) {
				t.Errorf("log %d = %s %v %x, want %s %v %d", i, l.Address, l.Topics, l.Data, token, want, i+1)
			}
		}
		h.check(t, "balanceOf(multicall)", h.call(t, token, erc20, "balanceOf", agg), big.NewInt(4))
		// A failing call reverts the transaction with its own revert data.
		over, err := erc20.Calldata("transfer", to[0], big.NewInt(5))
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Transact(ctx, agg, mc, "aggregate", token, [][]byte{calls[0], over})
		wantRevert(t, erc20, "ERC20InsufficientBalance")(nil, err)
		h.check(t, "balanceOf(multicall) after the revert", h.call(t, token, erc20, "balanceOf", agg), big.NewInt(4))
	})

	t.Run("OnChainERC721", func(t *testing.T) {
		nft := h.deploy(t, onChain)
		h.transact(t, nft, onChain, "mint", me, big.NewInt(42))
		uri := h.call(t, nft, onChain, "tokenURI", big.NewInt(42)).(string)
		const prefix = "data:application/json;base64,"
		if !strings.HasPrefix(uri, prefix) {
			t.Fatalf("tokenURI(42) = %.60q…, want the prefix %q", uri, prefix)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(uri, prefix))
		if err != nil {
			t.Fatalf("tokenURI(42): %v", err)
		}
		var meta struct {
			Name        string `json:"name"`
			Description string `json:"description"`
			Image       string `json:"image"`
			Attributes  []struct {
				TraitType string `json:"trait_type"`
				Value     int    `json:"value"`
			} `json:"attributes"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			t.Fatalf("tokenURI(42) JSON %s: %v", raw, err)
		}
		h.check(t, "name", meta.Name, "OnChain #42")
		h.check(t, "description", meta.Description, "Fully on-chain token")
		svg, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(meta.Image, "data:image/svg+xml;base64,"))
		if !strings.HasPrefix(meta.Image, "data:image/svg+xml;base64,") || err != nil || !strings.HasPrefix(string(svg), "<svg") {
			t.Errorf("image %q: not a base64 SVG data URI (%v)", meta.Image, err)
		}
		if len(meta.Attributes) != 1 || meta.Attributes[0].TraitType != "Number" || meta.Attributes[0].Value != 42 {
			t.Errorf("attributes = %+v, want [{Number 42}]", meta.Attributes)
		}
		h.check(t, "supportsInterface(ERC721Metadata)", h.call(t, nft, onChain, "supportsInterface", idERC721Metadata), true)
		wantRevert(t, onChain, "ERC721NonexistentToken")(s.Call(ctx, nft, onChain, "tokenURI", big.NewInt(43)))
	})

	t.Run("TransferEmitter", func(t *testing.T) {
		em := MustLoad("TransferEmitter")
		addr := h.deploy(t, em)
		word := func(v int64) common.Hash { return common.BigToHash(big.NewInt(v)) }
		holder := func(i int64) common.Hash { return common.BigToHash(big.NewInt(0x1000 + i%3)) }
		for _, c := range []struct {
			method string
			args   []any
			topics [][]common.Hash // of each log
			data   []int           // bytes of data of each log
		}{
			{"mint721", []any{big.NewInt(5), big.NewInt(2), big.NewInt(3)}, [][]common.Hash{
				{em.ABI.Events["Transfer"].ID, {}, holder(5), word(5)}, {em.ABI.Events["Transfer"].ID, {}, holder(6), word(6)}}, []int{0, 0}},
			{"move721", []any{big.NewInt(5), big.NewInt(1), big.NewInt(3), big.NewInt(1)}, [][]common.Hash{
				{em.ABI.Events["Transfer"].ID, holder(6), holder(7), word(5)}}, []int{0}},
			{"mint1155", []any{big.NewInt(9), big.NewInt(1), big.NewInt(3), big.NewInt(4)}, [][]common.Hash{
				{em.ABI.Events["TransferSingle"].ID, common.BytesToHash(me.Bytes()), {}, holder(9)}}, []int{64}},
			{"batch1155", []any{big.NewInt(10), big.NewInt(2), big.NewInt(3), big.NewInt(3)}, [][]common.Hash{
				{em.ABI.Events["TransferBatch"].ID, common.BytesToHash(me.Bytes()), {}, holder(10)},
				{em.ABI.Events["TransferBatch"].ID, common.BytesToHash(me.Bytes()), {}, holder(13)}}, []int{64 + 2*(32+3*32), 64 + 2*(32+3*32)}},
		} {
			r, err := h.s.Transact(ctx, addr, em, c.method, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Logs) != len(c.topics) {
				t.Fatalf("%s: %d logs, want %d", c.method, len(r.Logs), len(c.topics))
			}
			for i, l := range r.Logs {
				if !slices.Equal(l.Topics, c.topics[i]) || len(l.Data) != c.data[i] || l.Address != addr {
					t.Errorf("%s: log %d = %v %d bytes of data, want %v %d", c.method, i, l.Topics, len(l.Data), c.topics[i], c.data[i])
				}
			}
		}
	})

	t.Run("Plain", func(t *testing.T) {
		counter := h.deploy(t, plain)
		code, err := s.Client.CodeAt(ctx, counter, nil)
		if err != nil || len(code) == 0 {
			t.Fatalf("code at %s: %d bytes, %v", counter, len(code), err)
		}
		h.transact(t, counter, plain, "increment")
		h.transact(t, counter, plain, "increment")
		h.check(t, "count", h.call(t, counter, plain, "count"), big.NewInt(2))
		for _, m := range []string{"supportsInterface", "name", "symbol", "decimals", "totalSupply"} {
			if _, ok := plain.ABI.Methods[m]; ok {
				t.Errorf("Plain has %s", m)
			}
		}
		if _, err := s.Transact(ctx, me, plain, "increment"); !errors.Is(err, bind.ErrNoCode) {
			t.Errorf("Transact to an account without code: %v, want bind.ErrNoCode", err)
		}
		// No such function and no fallback: the call reverts, with no data.
		wantRevert(t, erc721, "")(s.Call(ctx, counter, erc721, "supportsInterface", idERC165))
		wantRevert(t, erc20, "")(s.Call(ctx, counter, erc20, "decimals"))
	})
}

// harness runs the steps of a test on one session, failing the (sub)test it is given.
type harness struct {
	ctx context.Context
	s   *Session
}

func (h *harness) deploy(t *testing.T, c *Contract, args ...any) common.Address {
	t.Helper()
	addr, err := h.s.Deploy(h.ctx, c, args...)
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func (h *harness) transact(t *testing.T, to common.Address, c *Contract, method string, args ...any) {
	t.Helper()
	if _, err := h.s.Transact(h.ctx, to, c, method, args...); err != nil {
		t.Fatal(err)
	}
}

// call returns the single result of method.
func (h *harness) call(t *testing.T, to common.Address, c *Contract, method string, args ...any) any {
	t.Helper()
	out, err := h.s.Call(h.ctx, to, c, method, args...)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 {
		t.Fatalf("%s.%s returned %d values, want 1", c.Name, method, len(out))
	}
	return out[0]
}

func (h *harness) check(t *testing.T, what string, got, want any) {
	t.Helper()
	if g, w := toComparable(got), toComparable(want); g != w {
		t.Errorf("%s = %v, want %v", what, g, w)
	}
}

// startSession starts a dev chain served over HTTP and returns a session signing with dev
// account 0, and dev account 1.
func startSession(t *testing.T) (*Session, devchain.Account) {
	t.Helper()
	chain := devchaintest.Start(t)
	client := chain.Client
	accounts, err := devchain.DevAccounts(2)
	if err != nil {
		t.Fatal(err)
	}
	if got := chain.Accounts()[:2]; got[0].Address != accounts[0].Address || got[1].Address != accounts[1].Address {
		t.Fatalf("DevAccounts(2) = %s, %s; the chain funds %s, %s",
			accounts[0].Address, accounts[1].Address, got[0].Address, got[1].Address)
	}
	return &Session{Client: client, Key: accounts[0].Key, ChainID: new(big.Int).SetUint64(chain.ChainID())}, accounts[1]
}

// wantRevert returns a check that a call reverted with the custom error named errName of c,
// or with no data when errName is empty.
func wantRevert(t *testing.T, c *Contract, errName string) func([]any, error) {
	return func(out []any, err error) {
		t.Helper()
		if err == nil {
			t.Errorf("call returned %v, want a revert", out)
			return
		}
		var dataErr rpc.DataError
		if !errors.As(err, &dataErr) {
			if errName == "" && strings.Contains(err.Error(), "execution reverted") {
				return
			}
			t.Errorf("error %v: not a revert", err)
			return
		}
		data, _ := dataErr.ErrorData().(string)
		got, decodeErr := hexutil.Decode(data)
		if errName == "" {
			if len(got) != 0 {
				t.Errorf("revert data %s, want none", data)
			}
			return
		}
		want := c.ABI.Errors[errName].ID
		if decodeErr != nil || len(got) < 4 || !bytes.Equal(got[:4], want[:4]) {
			t.Errorf("revert data %q (%v), want %s (%x…)", data, err, errName, want[:4])
		}
	}
}

// toComparable makes ABI results comparable with ==.
func toComparable(v any) any {
	switch v := v.(type) {
	case *big.Int:
		return v.String()
	case common.Address:
		return v.Hex()
	}
	return v
}
