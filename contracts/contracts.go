// Package contracts holds the Solidity test contracts of web3gate's token-metadata and
// NFT-owners tests and benchmarks, compiled, and a small helper to deploy and call them.
//
// The sources are in src/ (OpenZeppelin-based ERC-721, ERC-1155 and ERC-20 test tokens, an
// ERC-721 with fully on-chain token URIs, a contract implementing no token standard, an
// emitter of NFT transfer logs in bulk for the owners benchmark, and a multicall that makes
// the real-time benchmark's blocks of ERC-20 transfers).
// Their compiled artifacts in artifacts/ are committed and embedded; rebuild them after
// changing a source with `make contracts` (pinned solc and OpenZeppelin from npm). The build
// is reproducible: an unchanged source yields byte-identical artifacts.
package contracts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/accounts/abi"
	"github.com/ethereum/go-ethereum/accounts/abi/bind/v2"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"
)

//go:embed artifacts/*.json
var artifacts embed.FS

// Contract is a compiled contract: its ABI and creation bytecode.
type Contract struct {
	Name     string
	ABI      abi.ABI
	Bytecode []byte
}

// artifact is the layout of artifacts/<Name>.json, written by build.mjs.
type artifact struct {
	ContractName string          `json:"contractName"`
	ABI          json.RawMessage `json:"abi"`
	Bytecode     hexutil.Bytes   `json:"bytecode"`
}

// Load returns the embedded contract called name (the Solidity contract name, e.g.
// "TestERC721").
func Load(name string) (*Contract, error) {
	raw, err := artifacts.ReadFile("artifacts/" + name + ".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("contract %q: no such artifact (have %s)", name, strings.Join(names(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("contract %q: %w", name, err)
	}
	var a artifact
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("contract %q: artifact: %w", name, err)
	}
	parsed, err := abi.JSON(bytes.NewReader(a.ABI))
	if err != nil {
		return nil, fmt.Errorf("contract %q: abi: %w", name, err)
	}
	if a.ContractName != name || len(a.Bytecode) == 0 {
		return nil, fmt.Errorf("contract %q: malformed artifact (name %q, %d bytes of bytecode)",
			name, a.ContractName, len(a.Bytecode))
	}
	return &Contract{Name: name, ABI: parsed, Bytecode: a.Bytecode}, nil
}

// MustLoad is Load for contracts known to exist; it panics on an error.
func MustLoad(name string) *Contract {
	c, err := Load(name)
	if err != nil {
		panic(err)
	}
	return c
}

// names lists the embedded contracts.
func names() []string {
	files, _ := fs.Glob(artifacts, "artifacts/*.json") // the pattern is valid
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = strings.TrimSuffix(strings.TrimPrefix(f, "artifacts/"), ".json")
	}
	return out
}

// DeployData returns the data of a creation transaction: the bytecode followed by the
// ABI-encoded constructor arguments.
func (c *Contract) DeployData(args ...any) ([]byte, error) {
	packed, err := c.ABI.Pack("", args...)
	if err != nil {
		return nil, fmt.Errorf("%s constructor: %w", c.Name, err)
	}
	return append(bytes.Clone(c.Bytecode), packed...), nil
}

// Calldata returns the ABI-encoded call of method with args.
//
// Here and in Session, method is a method's name as go-ethereum's abi package names it,
// where an overload gets a numeric suffix (ERC-1155's totalSupply(uint256) is "totalSupply0"
// next to totalSupply()), or its canonical signature, e.g. "totalSupply(uint256)".
func (c *Contract) Calldata(method string, args ...any) ([]byte, error) {
	data, err := c.ABI.Pack(c.method(method), args...)
	if err != nil {
		return nil, fmt.Errorf("%s.%s: %w", c.Name, method, err)
	}
	return data, nil
}

// method resolves a canonical signature to the abi package's name of the method; any other
// string is returned as it is.
func (c *Contract) method(m string) string {
	if strings.Contains(m, "(") {
		for name, def := range c.ABI.Methods {
			if def.Sig == m {
				return name
			}
		}
	}
	return m
}

// Session sends transactions signed with Key to the chain behind Client, and calls
// contracts there. Each transaction takes its nonce from the pending state and is awaited, so
// one key must not be used by concurrent transactions.
type Session struct {
	Client  *ethclient.Client
	Key     *ecdsa.PrivateKey
	ChainID *big.Int
}

const (
	// receiptPoll is how often a transaction's receipt is asked for.
	receiptPoll = 20 * time.Millisecond
	// gasMarginPercent is added to the estimated gas of every transaction.
	gasMarginPercent = 20
)

// Deploy deploys c with the constructor arguments args and returns its address once the
// creation transaction is mined.
func (s *Session) Deploy(ctx context.Context, c *Contract, args ...any) (common.Address, error) {
	data, err := c.DeployData(args...)
	if err != nil {
		return common.Address{}, err
	}
	receipt, err := s.send(ctx, nil, data)
	if err != nil {
		return common.Address{}, fmt.Errorf("deploy %s: %w", c.Name, c.explain(err))
	}
	return receipt.ContractAddress, nil
}

// Transact calls method of the contract c at to in a transaction and returns its receipt
// once mined. A call the node predicts to revert fails at gas estimation, with the revert
// reason; a mined transaction that failed (status 0) is an error too.
func (s *Session) Transact(ctx context.Context, to common.Address, c *Contract, method string, args ...any) (*types.Receipt, error) {
	data, err := c.Calldata(method, args...)
	if err != nil {
		return nil, err
	}
	// Without code the transaction would succeed and do nothing.
	code, err := s.Client.PendingCodeAt(ctx, to)
	if err == nil && len(code) == 0 {
		err = bind.ErrNoCode
	}
	var receipt *types.Receipt
	if err == nil {
		receipt, err = s.send(ctx, &to, data)
	}
	if err != nil {
		return nil, fmt.Errorf("%s.%s at %s: %w", c.Name, method, to, c.explain(err))
	}
	return receipt, nil
}

// Call runs method of the contract c at to with eth_call on the latest block and returns the
// unpacked results. A revert is an error; so is a contract without code
// (bind.ErrNoCode).
func (s *Session) Call(ctx context.Context, to common.Address, c *Contract, method string, args ...any) ([]any, error) {
	var out []any
	bound := bind.NewBoundContract(to, c.ABI, s.Client, s.Client, s.Client)
	opts := &bind.CallOpts{Context: ctx, From: crypto.PubkeyToAddress(s.Key.PublicKey)}
	if err := bound.Call(opts, &out, c.method(method), args...); err != nil {
		return nil, fmt.Errorf("%s.%s at %s: %w", c.Name, method, to, c.explain(err))
	}
	return out, nil
}

// explain appends to a revert error the revert's meaning when its data is a custom error of
// c, an Error(string) or a Panic(uint256), e.g. "execution reverted:
// ERC721NonexistentToken(43)". The node's error (an rpc.DataError) stays in the chain.
func (c *Contract) explain(err error) error {
	var dataErr rpc.DataError
	if !errors.As(err, &dataErr) {
		return err
	}
	hex, _ := dataErr.ErrorData().(string)
	data, decodeErr := hexutil.Decode(hex)
	if decodeErr != nil || len(data) < 4 {
		return err
	}
	if reason, unpackErr := abi.UnpackRevert(data); unpackErr == nil {
		return fmt.Errorf("%w: %s", err, reason)
	}
	if def, lookupErr := c.ABI.ErrorByID([4]byte(data[:4])); lookupErr == nil {
		if args, unpackErr := def.Inputs.Unpack(data[4:]); unpackErr == nil {
			shown := make([]string, len(args))
			for i, a := range args {
				shown[i] = fmt.Sprint(a)
			}
			return fmt.Errorf("%w: %s(%s)", err, def.Name, strings.Join(shown, ", "))
		}
	}
	return err
}

// send signs and sends a dynamic-fee transaction to to (nil: a contract creation) and
// waits for its receipt. bind fills in the nonce (pending), the tip (eth_maxPriorityFeePerGas)
// and the fee cap (tip + 2 × the latest base fee); the gas limit is estimated here, with a
// margin.
func (s *Session) send(ctx context.Context, to *common.Address, data []byte) (*types.Receipt, error) {
	opts := bind.NewKeyedTransactor(s.Key, s.ChainID)
	opts.Context = ctx
	gas, err := s.Client.EstimateGas(ctx, ethereum.CallMsg{From: opts.From, To: to, Data: data})
	if err != nil {
		return nil, fmt.Errorf("estimate gas: %w", err)
	}
	opts.GasLimit = gas + gas*gasMarginPercent/100

	var tx *types.Transaction
	if to == nil {
		tx, err = bind.NewBoundContract(common.Address{}, abi.ABI{}, s.Client, s.Client, s.Client).RawCreationTransact(opts, data)
	} else {
		tx, err = bind.NewBoundContract(*to, abi.ABI{}, s.Client, s.Client, s.Client).RawTransact(opts, data)
	}
	if err != nil {
		return nil, fmt.Errorf("send: %w", err)
	}
	receipt, err := s.waitReceipt(ctx, tx.Hash())
	if err != nil {
		return nil, err
	}
	if receipt.Status != types.ReceiptStatusSuccessful {
		return receipt, fmt.Errorf("transaction %s failed in block %d (status 0, %d of %d gas used)",
			tx.Hash(), receipt.BlockNumber, receipt.GasUsed, tx.Gas())
	}
	return receipt, nil
}

// waitReceipt polls for the receipt of hash until it exists and the node's latest block has
// reached the receipt's block, or ctx ends. Like bind.WaitMined, but polling every
// receiptPoll instead of every second, failing on errors other than "not mined yet" and
// "transaction indexing is in progress", and waiting for "latest" too: geth's dev mode can
// serve a receipt a moment before its block becomes the head, and a read at "latest" in
// that moment does not see the transaction (seen as a deployed contract without code).
func (s *Session) waitReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error) {
	ticker := time.NewTicker(receiptPoll)
	defer ticker.Stop()
	var receipt *types.Receipt
	for {
		var err error
		if receipt == nil {
			receipt, err = s.Client.TransactionReceipt(ctx, hash)
		}
		if err == nil {
			head, herr := s.Client.BlockNumber(ctx)
			if herr != nil {
				return nil, fmt.Errorf("head after the receipt of %s: %w", hash, herr)
			}
			if head >= receipt.BlockNumber.Uint64() {
				return receipt, nil
			}
			err = ethereum.NotFound // the head has yet to reach the receipt's block
		}
		if !errors.Is(err, ethereum.NotFound) && !indexing(err) {
			return nil, fmt.Errorf("receipt of %s: %w", hash, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("receipt of %s: %w", hash, context.Cause(ctx))
		case <-ticker.C:
		}
	}
}

// indexing reports whether err is the node's transient "transaction indexing is in
// progress" answer (-32000), which geth gives for by-hash lookups while its transaction
// indexer catches up.
func indexing(err error) bool {
	var rpcErr rpc.Error
	return errors.As(err, &rpcErr) && rpcErr.ErrorCode() == -32000 &&
		strings.Contains(rpcErr.Error(), "transaction indexing is in progress")
}
