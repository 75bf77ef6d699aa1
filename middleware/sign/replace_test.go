package sign

import (
	"errors"
	"math/big"
	"net/http"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

func TestReplaceFees(t *testing.T) {
	for _, tc := range []struct {
		body         string
		cap, tip, gp int64 // -1: absent
		none         bool
	}{
		{body: "", none: true},
		{body: "  \n", none: true},
		{body: `{}`, cap: -1, tip: -1, gp: -1},
		{body: `{"maxFeePerGas":"0x64","maxPriorityFeePerGas":"0xa"}`, cap: 100, tip: 10, gp: -1},
		{body: `{"gasPrice":"0x3b9aca00"}`, cap: -1, tip: -1, gp: 1_000_000_000},
	} {
		f, err := replaceFees([]byte(tc.body))
		if err != nil {
			t.Fatalf("%q: %v", tc.body, err)
		}
		if tc.none {
			if f != nil {
				t.Errorf("%q: %+v, want none", tc.body, f)
			}
			continue
		}
		for _, c := range []struct {
			got  *big.Int
			want int64
		}{{f.MaxFeePerGas, tc.cap}, {f.MaxPriorityFeePerGas, tc.tip}, {f.GasPrice, tc.gp}} {
			if (c.want < 0) != (c.got == nil) || c.got != nil && c.got.Int64() != c.want {
				t.Errorf("%q: %v, want %d", tc.body, c.got, c.want)
			}
		}
	}
}

func TestReplaceFeesRefused(t *testing.T) {
	for _, body := range []string{
		`{"fee":"0x1"}`,         // unknown member
		`{"gasPrice":100}`,      // not a 0x quantity
		`{"gasPrice":"0x01"}`,   // leading zero
		`[1]`,                   // not an object
		`{"maxFeePerGas":"0x1"`, // truncated
	} {
		_, err := replaceFees([]byte(body))
		var he *proxy.HTTPError
		if !errors.As(err, &he) || he.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", body, err)
		}
	}
}

// TestVersionsOfARequest: the original first, its state read from the request's mined hash
// (replaced once another version is mined), a version's fees from its fields.
func TestVersionsOfARequest(t *testing.T) {
	orig, bump := common.HexToHash("0x01"), common.HexToHash("0x02")
	rec := &store.TxRecord{Hash: orig, State: store.StateMined, MinedHash: bump, Kind: store.KindSend,
		Fields: []byte(`{"from":"0x0000000000000000000000000000000000000001","maxFeePerGas":"0x3","maxPriorityFeePerGas":"0x1"}`)}
	vs := []*store.TxVersion{{Hash: bump, Kind: store.VersionBump, State: store.VersionBroadcast,
		Fields: []byte(`{"maxFeePerGas":"0x9","maxPriorityFeePerGas":"0x2"}`)}}
	tx := transactionOf(rec, vs)
	if tx.MinedHash == nil || *tx.MinedHash != bump || len(tx.Versions) != 2 {
		t.Fatalf("%+v", tx)
	}
	o, b := tx.Versions[0], tx.Versions[1]
	if o.Kind != "original" || o.State != "replaced" || o.MaxFeePerGas.ToInt().Int64() != 3 || o.GasPrice != nil {
		t.Errorf("original: %+v", o)
	}
	if b.Kind != "bump" || b.State != "mined" || b.MaxFeePerGas.ToInt().Int64() != 9 || b.MaxPriorityFeePerGas.ToInt().Int64() != 2 {
		t.Errorf("bump: %+v", b)
	}
	pending := &store.TxRecord{Hash: orig, State: store.StateSigned, Fields: []byte(`{"gasPrice":"0x5"}`)}
	if v := transactionOf(pending, nil).Versions; len(v) != 1 || v[0].State != "signed" || v[0].GasPrice.ToInt().Int64() != 5 {
		t.Errorf("a signed request: %+v", v)
	}
	if v := transactionOf(&store.TxRecord{State: store.StateReserved}, nil).Versions; v == nil || len(v) != 0 {
		t.Errorf("a reserved request lists %+v, want []", v)
	}
}

// FuzzReplaceFees: any body is either read (fees of at most 256 bits) or refused with a 400.
func FuzzReplaceFees(f *testing.F) {
	for _, s := range []string{"", "{}", `{"gasPrice":"0x1"}`, `{"maxFeePerGas":"0x64","maxPriorityFeePerGas":"0xa"}`, `{"fee":1}`, `[`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fees, err := replaceFees(body)
		if err != nil {
			var he *proxy.HTTPError
			if !errors.As(err, &he) || he.Status != http.StatusBadRequest {
				t.Fatalf("%q: %v, want a 400", body, err)
			}
			return
		}
		if fees == nil {
			return
		}
		for _, v := range []*big.Int{fees.MaxFeePerGas, fees.MaxPriorityFeePerGas, fees.GasPrice} {
			if v != nil && (v.Sign() < 0 || v.BitLen() > 256) {
				t.Fatalf("%q: fee %v", body, v)
			}
		}
	})
}
