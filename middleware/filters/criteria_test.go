package filters

import (
	"encoding/json"
	"testing"

	"github.com/web3gate/web3gate/feeds"
)

// TestStoredCriteria: the criteria are stored in one canonical form that reads back the
// same, with block numbers and tags as given (geth reads hex numbers only).
func TestStoredCriteria(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{}`},
		{`null`, `{}`},
		{`{"address":"0x00000000000000000000000000000000000000AA"}`, `{"address":["0x00000000000000000000000000000000000000aa"]}`},
		{`{"topics":[null,"0x0000000000000000000000000000000000000000000000000000000000000001",[]]}`,
			`{"topics":[null,["0x0000000000000000000000000000000000000000000000000000000000000001"],null]}`},
		{`{"fromBlock":"0x10","toBlock":"latest"}`, `{"fromBlock":"0x10","toBlock":"latest"}`},
		{`{"fromBlock":"earliest"}`, `{"fromBlock":"earliest"}`},
		{`{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000ff"}`,
			`{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000ff"}`},
	} {
		crit, err := feeds.ParseCriteria([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		got, err := storeCriteria(crit)
		if err != nil || got != tc.want {
			t.Fatalf("storeCriteria(%s) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
		again, err := feeds.ParseCriteria([]byte(got))
		if err != nil {
			t.Fatalf("stored %s does not parse: %v", got, err)
		}
		if round, _ := storeCriteria(again); round != got {
			t.Fatalf("stored %s reads back as %s", got, round)
		}
	}
}

// TestBlockRange: the range of a filter's polls, as geth's eth_newFilter accepts it.
func TestBlockRange(t *testing.T) {
	for _, tc := range []struct {
		from, to string
		in, out  []uint64
	}{
		{"", "", []uint64{0, 1, 1 << 40}, nil},
		{"latest", "latest", []uint64{0, 7}, nil},
		{"earliest", "latest", []uint64{0, 7}, nil},
		{"0x5", "", []uint64{5, 6}, []uint64{4}},
		{"0x5", "0x7", []uint64{5, 7}, []uint64{4, 8}},
		{"0x5", "0x5", []uint64{5}, []uint64{4, 6}},
	} {
		obj := map[string]string{}
		for k, v := range map[string]string{"fromBlock": tc.from, "toBlock": tc.to} {
			if v != "" {
				obj[k] = v
			}
		}
		raw, _ := json.Marshal(obj)
		crit, err := feeds.ParseCriteria(raw)
		if err != nil {
			t.Fatal(err)
		}
		r, err := blockRange(crit)
		if err != nil {
			t.Fatalf("%q..%q: %v", tc.from, tc.to, err)
		}
		for _, n := range tc.in {
			if !r.contains(n) {
				t.Errorf("%q..%q does not contain %d", tc.from, tc.to, n)
			}
		}
		for _, n := range tc.out {
			if r.contains(n) {
				t.Errorf("%q..%q contains %d", tc.from, tc.to, n)
			}
		}
	}
}

// FuzzStoredCriteria: any criteria eth_newFilter accepts are stored in a form that reads back
// to the same stored form and the same block range; nothing panics.
func FuzzStoredCriteria(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `{"address":"0x00000000000000000000000000000000000000AA","topics":[null,[]]}`,
		`{"fromBlock":"0x10","toBlock":"latest"}`, `{"fromBlock":"earliest","toBlock":"0x0"}`,
		`{"fromBlock":"pending"}`, `{"toBlock":"0x7fffffffffffffff"}`,
		`{"blockHash":"0x00000000000000000000000000000000000000000000000000000000000000ff"}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		crit, err := feeds.ParseCriteria([]byte(in))
		if err != nil {
			return
		}
		rng, err := blockRange(crit)
		if err != nil {
			return
		}
		stored, err := storeCriteria(crit)
		if err != nil {
			t.Fatalf("storeCriteria(%s): %v", in, err)
		}
		again, err := feeds.ParseCriteria([]byte(stored))
		if err != nil {
			t.Fatalf("stored %s (of %s) does not parse: %v", stored, in, err)
		}
		round, err := storeCriteria(again)
		if err != nil || round != stored {
			t.Fatalf("stored %s reads back as %s, %v", stored, round, err)
		}
		if r2, err := blockRange(again); err != nil || r2 != rng {
			t.Fatalf("stored %s: range %+v, %v; was %+v", stored, r2, err, rng)
		}
	})
}
