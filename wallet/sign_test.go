package wallet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/ethereum/go-ethereum/accounts"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/common/hexutil"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/signer/core/apitypes"
	"github.com/holiman/uint256"
)

// signersOf signs with the keys of k alone, as the server does for keystore accounts.
func signersOf(k *Keys) *Signers { return NewSigners(k, SignersDeps{}) }

// inMemoryKeys returns an empty keystore in a temporary directory holding the key
// keccak256(seed) in memory, and that key's address.
func inMemoryKeys(t testing.TB, seed string) (*Keys, common.Address) {
	t.Helper()
	k := openTest(t, t.TempDir(), testPass)
	key, err := crypto.ToECDSA(crypto.Keccak256([]byte(seed)))
	if err != nil {
		t.Fatal(err)
	}
	return k, k.AddInMemory(key)
}

var (
	chain137  = big.NewInt(137)
	recipient = common.HexToAddress("0x00000000000000000000000000000000000000b0")
)

func legacyTx() *types.Transaction {
	return types.NewTx(&types.LegacyTx{
		Nonce: 7, GasPrice: big.NewInt(30_000_000_000), Gas: 21000, To: &recipient,
		Value: big.NewInt(1_000_000_000_000_000), Data: nil,
	})
}

func dynamicFeeTx(chainID *big.Int) *types.Transaction {
	return types.NewTx(&types.DynamicFeeTx{
		ChainID: chainID, Nonce: 8, GasTipCap: big.NewInt(2_000_000_000), GasFeeCap: big.NewInt(40_000_000_000),
		Gas: 50000, To: &recipient, Value: big.NewInt(1), Data: []byte{0xde, 0xad, 0xbe, 0xef},
	})
}

func TestSignTxRecoversToTheSender(t *testing.T) {
	k, addr := inMemoryKeys(t, "sign tx")
	tests := []struct {
		name     string
		tx       *types.Transaction
		wantType uint8
	}{
		{"legacy, EIP-155", legacyTx(), types.LegacyTxType},
		{"dynamic fee, chain id left to the signer", dynamicFeeTx(nil), types.DynamicFeeTxType},
		{"dynamic fee, chain id set", dynamicFeeTx(chain137), types.DynamicFeeTxType},
		{"access list", types.NewTx(&types.AccessListTx{ChainID: chain137, Nonce: 1, GasPrice: big.NewInt(1), Gas: 30000, To: &recipient}), types.AccessListTxType},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signed, err := signersOf(k).SignTx(context.Background(), addr, tt.tx, chain137)
			if err != nil {
				t.Fatalf("SignTx: %v", err)
			}
			if signed.Type() != tt.wantType || signed.ChainId().Cmp(chain137) != 0 || !signed.Protected() {
				t.Fatalf("signed: type %d, chain id %v, protected %v; want type %d, chain 137, protected",
					signed.Type(), signed.ChainId(), signed.Protected(), tt.wantType)
			}
			if signed.Nonce() != tt.tx.Nonce() || signed.Gas() != tt.tx.Gas() || !bytes.Equal(signed.Data(), tt.tx.Data()) {
				t.Fatal("signed transaction differs from the input")
			}
			// Round trip through the wire encoding, as eth_sendRawTransaction receives it.
			raw, err := signed.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			var decoded types.Transaction
			if err := decoded.UnmarshalBinary(raw); err != nil {
				t.Fatal(err)
			}
			from, err := types.Sender(types.LatestSignerForChainID(chain137), &decoded)
			if err != nil {
				t.Fatalf("types.Sender: %v", err)
			}
			if from != addr {
				t.Fatalf("sender = %s, want %s", from, addr)
			}
			// On another chain the same signature recovers to someone else (replay protection).
			if other, err := types.Sender(types.LatestSignerForChainID(big.NewInt(1)), &decoded); err == nil && other == addr {
				t.Fatal("signature recovers to the sender on chain 1 too")
			}
		})
	}
}

func TestSignTxLegacyV(t *testing.T) {
	k, addr := inMemoryKeys(t, "sign tx")
	signed, err := signersOf(k).SignTx(context.Background(), addr, legacyTx(), chain137)
	if err != nil {
		t.Fatal(err)
	}
	v, _, _ := signed.RawSignatureValues()
	if v.Cmp(big.NewInt(137*2+35)) != 0 && v.Cmp(big.NewInt(137*2+36)) != 0 {
		t.Fatalf("v = %v, want 309 or 310 (EIP-155: chainId*2 + 35 + parity)", v)
	}
}

func TestSignTxRefuses(t *testing.T) {
	k, addr := inMemoryKeys(t, "sign tx")
	blob := types.NewTx(&types.BlobTx{ChainID: uint256.NewInt(137), Gas: 21000, To: recipient,
		GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(1), BlobFeeCap: uint256.NewInt(1),
		BlobHashes: []common.Hash{{0x01}}})
	setCode := types.NewTx(&types.SetCodeTx{ChainID: uint256.NewInt(137), Gas: 50000, To: recipient,
		GasTipCap: uint256.NewInt(1), GasFeeCap: uint256.NewInt(1)})
	tests := []struct {
		name    string
		tx      *types.Transaction
		chainID *big.Int
		want    string
	}{
		{"no transaction", nil, chain137, "no transaction"},
		{"no chain id", legacyTx(), nil, "chain id must be positive"},
		{"zero chain id", legacyTx(), new(big.Int), "chain id must be positive"},
		{"negative chain id", legacyTx(), big.NewInt(-1), "chain id must be positive"},
		{"chain id of another chain inside", dynamicFeeTx(big.NewInt(1)), chain137, "invalid chain id"},
		{"blob transaction", blob, chain137, "type 3 is not supported"},
		{"set-code transaction", setCode, chain137, "type 4 is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			signed, err := signersOf(k).SignTx(context.Background(), addr, tt.tx, tt.chainID)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("SignTx: err = %v, want one containing %q", err, tt.want)
			}
			if signed != nil {
				t.Fatal("SignTx returned a transaction with an error")
			}
		})
	}
}

func TestSignHash(t *testing.T) {
	k, addr := inMemoryKeys(t, "sign hash")
	hash := crypto.Keccak256([]byte("a 32-byte digest"))
	sig, err := k.SignHash(addr, hash)
	if err != nil {
		t.Fatalf("SignHash: %v", err)
	}
	if len(sig) != 65 || sig[64] > 1 {
		t.Fatalf("signature = %x, want 65 bytes with V in {0,1}", sig)
	}
	pub, err := crypto.SigToPub(hash, sig)
	if err != nil {
		t.Fatal(err)
	}
	if got := crypto.PubkeyToAddress(*pub); got != addr {
		t.Fatalf("recovered %s, want %s", got, addr)
	}
	for _, n := range []int{0, 31, 33} {
		if _, err := k.SignHash(addr, make([]byte, n)); err == nil || !strings.Contains(err.Error(), "must be 32 bytes") {
			t.Errorf("SignHash of %d bytes: err = %v, want a length error", n, err)
		}
	}
}

func TestSignText(t *testing.T) {
	k, addr := inMemoryKeys(t, "sign text")
	for _, msg := range [][]byte{[]byte("Hello, web3gate!"), {}, bytes.Repeat([]byte{0xff}, 1000)} {
		sig, err := signersOf(k).SignText(context.Background(), addr, msg)
		if err != nil {
			t.Fatalf("SignText: %v", err)
		}
		if len(sig) != 65 || (sig[64] != 27 && sig[64] != 28) {
			t.Fatalf("signature = %x, want 65 bytes with V in {27,28}", sig)
		}
		raw := bytes.Clone(sig)
		raw[64] -= 27
		pub, err := crypto.SigToPub(accounts.TextHash(msg), raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := crypto.PubkeyToAddress(*pub); got != addr {
			t.Fatalf("recovered %s, want %s", got, addr)
		}
	}
}

// mailTypedData is the example of EIP-712 (its Example.js), signed by keccak256("cow").
const mailTypedData = `{
  "types": {
    "EIP712Domain": [
      {"name": "name", "type": "string"},
      {"name": "version", "type": "string"},
      {"name": "chainId", "type": "uint256"},
      {"name": "verifyingContract", "type": "address"}
    ],
    "Person": [
      {"name": "name", "type": "string"},
      {"name": "wallet", "type": "address"}
    ],
    "Mail": [
      {"name": "from", "type": "Person"},
      {"name": "to", "type": "Person"},
      {"name": "contents", "type": "string"}
    ]
  },
  "primaryType": "Mail",
  "domain": {
    "name": "Ether Mail",
    "version": "1",
    "chainId": 1,
    "verifyingContract": "0xCcCCccccCCCCcCCCCCCcCcCccCcCCCcCcccccccC"
  },
  "message": {
    "from": {"name": "Cow", "wallet": "0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"},
    "to": {"name": "Bob", "wallet": "0xbBbBBBBbbBBBbbbBbbBbbbbBBbBbbbbBbBbbBBbB"},
    "contents": "Hello, Bob!"
  }
}`

func mailExample(t *testing.T) apitypes.TypedData {
	t.Helper()
	var data apitypes.TypedData
	if err := json.Unmarshal([]byte(mailTypedData), &data); err != nil {
		t.Fatal(err)
	}
	return data
}

// TestSignTypedDataEIP712Example signs the EIP's own Mail example with the EIP's key and
// compares with the EIP's signature. The digest is also the one of go-ethereum's
// signer/core/apitypes/testdata/typed-data.json; the signature is the response of the
// account_signTypedData example in go-ethereum's signer/core/api_layout.md (RFC 6979
// signatures are deterministic, so it is reproduced exactly).
func TestSignTypedDataEIP712Example(t *testing.T) {
	k, addr := inMemoryKeys(t, "cow")
	if want := common.HexToAddress("0xCD2a3d9F938E13CD947Ec05AbC7FE734Df8DD826"); addr != want {
		t.Fatalf("address of keccak256(\"cow\") = %s, want %s", addr, want)
	}
	data := mailExample(t)
	digest, _, err := apitypes.TypedDataAndHash(data)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hexutil.Encode(digest), "0xbe609aee343fb3c4b28e1df9e632fca64fcfaede20f02e86244efddf30957bd2"; got != want {
		t.Fatalf("digest = %s, want %s", got, want)
	}
	sig, err := signersOf(k).SignTypedData(context.Background(), addr, data)
	if err != nil {
		t.Fatalf("SignTypedData: %v", err)
	}
	const (
		wantR = "0x4355c47d63924e8a72e509b65029052eb6c299d53a04e167c5775fd466751c9d"
		wantS = "0x07299936d304c153f6443dfa05f40ff007d72911b6f72307f996231605b91562"
		wantV = 28
	)
	if r, s, v := hexutil.Encode(sig[:32]), hexutil.Encode(sig[32:64]), sig[64]; r != wantR || s != wantS || v != wantV {
		t.Fatalf("signature r=%s s=%s v=%d, want r=%s s=%s v=%d", r, s, v, wantR, wantS, wantV)
	}
	raw := bytes.Clone(sig)
	raw[64] -= 27
	pub, err := crypto.SigToPub(digest, raw)
	if err != nil {
		t.Fatal(err)
	}
	if got := crypto.PubkeyToAddress(*pub); got != addr {
		t.Fatalf("recovered %s, want %s", got, addr)
	}
}

func TestSignTypedDataRejectsInvalidData(t *testing.T) {
	k, addr := inMemoryKeys(t, "cow")
	data := mailExample(t)
	data.Message["contents"] = 42 // a number for a string field
	if _, err := signersOf(k).SignTypedData(context.Background(), addr, data); err == nil || !strings.Contains(err.Error(), "typed data:") {
		t.Fatalf("SignTypedData: err = %v, want a typed data error", err)
	}
}

func TestUnknownAccount(t *testing.T) {
	k, _ := inMemoryKeys(t, "known")
	stranger := common.HexToAddress("0x000000000000000000000000000000000000dEaD")
	hash := crypto.Keccak256([]byte("x"))
	tests := []struct {
		name string
		sign func() error
	}{
		{"SignTx", func() error {
			_, err := signersOf(k).SignTx(context.Background(), stranger, legacyTx(), chain137)
			return err
		}},
		{"SignHash", func() error { _, err := k.SignHash(stranger, hash); return err }},
		{"SignText", func() error { _, err := signersOf(k).SignText(context.Background(), stranger, []byte("x")); return err }},
		{"SignTypedData", func() error {
			_, err := signersOf(k).SignTypedData(context.Background(), stranger, mailExample(t))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.sign()
			if !errors.Is(err, ErrUnknownAccount) {
				t.Fatalf("err = %v, want ErrUnknownAccount", err)
			}
			if !strings.Contains(err.Error(), stranger.Hex()) {
				t.Fatalf("error %q does not name the address", err)
			}
		})
	}
	if k.Has(stranger) {
		t.Fatal("Has(stranger) = true")
	}
}

// TestConcurrentSigningWhileKeysChange signs from many goroutines while keys are created and
// added, for the race detector.
func TestConcurrentSigningWhileKeysChange(t *testing.T) {
	k, addr := inMemoryKeys(t, "concurrent")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				signed, err := signersOf(k).SignTx(context.Background(), addr, legacyTx(), chain137)
				if err != nil {
					t.Error(err)
					return
				}
				if from, err := types.Sender(types.LatestSignerForChainID(chain137), signed); err != nil || from != addr {
					t.Errorf("sender = %s (%v), want %s", from, err, addr)
					return
				}
			}
		})
	}
	for i := range 4 {
		wg.Go(func() {
			if _, err := k.New(); err != nil {
				t.Error(err)
			}
			key, _ := crypto.ToECDSA(crypto.Keccak256([]byte{byte(i)}))
			k.AddInMemory(key)
			_ = k.Addresses()
		})
	}
	wg.Wait()
	if n := len(k.Addresses()); n != 9 {
		t.Fatalf("%d keys held, want 9", n)
	}
}

// BenchmarkSignTx measures eth_signTransaction's signing step from all cores against a
// baseline of types.SignTx with the key at hand, in the same run.
func BenchmarkSignTx(b *testing.B) {
	k, addr := inMemoryKeys(b, "bench")
	key, _ := crypto.ToECDSA(crypto.Keccak256([]byte("bench")))
	signer := types.LatestSignerForChainID(chain137)
	run := func(b *testing.B, sign func(*types.Transaction) (*types.Transaction, error)) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			tx := legacyTx()
			for pb.Next() {
				if _, err := sign(tx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sigs/s")
	}
	b.Run("baseline=types.SignTx", func(b *testing.B) {
		run(b, func(tx *types.Transaction) (*types.Transaction, error) { return types.SignTx(tx, signer, key) })
	})
	b.Run("Signers.SignTx", func(b *testing.B) {
		signers := signersOf(k)
		run(b, func(tx *types.Transaction) (*types.Transaction, error) {
			return signers.SignTx(context.Background(), addr, tx, chain137)
		})
	})
}
