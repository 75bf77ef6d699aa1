package feeds

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/web3gate/web3gate/proxy/jsonrpc"
)

var (
	addrA  = common.HexToAddress("0x00000000000000000000000000000000000000aa")
	addrB  = common.HexToAddress("0x00000000000000000000000000000000000000bb")
	topic1 = common.HexToHash("0x01")
	topic2 = common.HexToHash("0x02")
	topic3 = common.HexToHash("0x03")
)

func TestParseCriteria(t *testing.T) {
	hash := common.HexToHash("0xabcdef")
	for _, tc := range []struct {
		name, in string
		want     Criteria
	}{
		{"empty object", `{}`, Criteria{}},
		{"null", `null`, Criteria{}},
		{"nothing", ``, Criteria{}},
		{"one address", `{"address":"0x00000000000000000000000000000000000000AA"}`, Criteria{Addresses: []common.Address{addrA}}},
		{"address array", `{"address":["0x00000000000000000000000000000000000000aa","0x00000000000000000000000000000000000000bb"]}`,
			Criteria{Addresses: []common.Address{addrA, addrB}}},
		{"empty address array", `{"address":[]}`, Criteria{}},
		{"null address", `{"address":null}`, Criteria{}},
		{"topics: hash, null, any-of", `{"topics":["` + topic1.Hex() + `",null,["` + topic2.Hex() + `","` + topic3.Hex() + `"]]}`,
			Criteria{Topics: [][]common.Hash{{topic1}, nil, {topic2, topic3}}}},
		{"topics: a null among alternatives matches any", `{"topics":[["` + topic1.Hex() + `",null,"` + topic2.Hex() + `"]]}`,
			Criteria{Topics: [][]common.Hash{nil}}},
		{"topics: trailing nulls kept", `{"topics":[null,null,null,null]}`, Criteria{Topics: [][]common.Hash{nil, nil, nil, nil}}},
		{"topics: empty alternatives", `{"topics":[[]]}`, Criteria{Topics: [][]common.Hash{nil}}},
		{"range tags", `{"fromBlock":"earliest","toBlock":"latest"}`,
			Criteria{FromBlock: "earliest", ToBlock: "latest", From: rpc.EarliestBlockNumber, To: rpc.LatestBlockNumber}},
		{"range numbers as given", `{"fromBlock":"0x10","toBlock":"0x0"}`, Criteria{FromBlock: "0x10", ToBlock: "0x0", From: 16, To: 0}},
		{"safe, finalized, pending", `{"fromBlock":"safe","toBlock":"finalized"}`,
			Criteria{FromBlock: "safe", ToBlock: "finalized", From: rpc.SafeBlockNumber, To: rpc.FinalizedBlockNumber}},
		{"pending", `{"toBlock":"pending"}`, Criteria{ToBlock: "pending", From: rpc.LatestBlockNumber, To: rpc.PendingBlockNumber}},
		{"null range", `{"fromBlock":null,"toBlock":null,"blockHash":"` + hash.Hex() + `"}`, Criteria{BlockHash: &hash}},
		{"blockHash", `{"blockHash":"` + hash.Hex() + `"}`, Criteria{BlockHash: &hash}},
		{"unknown members ignored", `{"foo":1,"address":"0x00000000000000000000000000000000000000aa"}`, Criteria{Addresses: []common.Address{addrA}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseCriteria(json.RawMessage(tc.in))
			if err != nil {
				t.Fatalf("ParseCriteria(%s): %v", tc.in, err)
			}
			if string(got.Raw) != tc.in {
				t.Errorf("Raw = %s, want the input", got.Raw)
			}
			got.Raw = nil
			if tc.want.FromBlock == "" && tc.want.ToBlock == "" {
				tc.want.From, tc.want.To = rpc.LatestBlockNumber, rpc.LatestBlockNumber // absent
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseCriteria(%s) = %+v, want %+v", tc.in, *got, tc.want)
			}
		})
	}
}

func TestParseCriteriaErrors(t *testing.T) {
	many := func(n int, v string) string { return strings.TrimSuffix(strings.Repeat(`"`+v+`",`, n), ",") }
	for _, tc := range []struct {
		name, in, want string
	}{
		{"blockHash with fromBlock", `{"blockHash":"` + topic1.Hex() + `","fromBlock":"0x1"}`,
			"cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other"},
		{"blockHash with toBlock", `{"toBlock":"latest","blockHash":"` + topic1.Hex() + `"}`,
			"cannot specify both BlockHash and FromBlock/ToBlock, choose one or the other"},
		{"five topics", `{"topics":[null,null,null,null,null]}`, "exceed max topics"},
		{"too many alternatives", `{"topics":[[` + many(1001, topic1.Hex()) + `]]}`, "exceed max topics"},
		{"too many addresses", `{"address":[` + many(1001, addrA.Hex()) + `]}`, "exceed max addresses or topics per search position"},
		{"short topic", `{"topics":["0x01"]}`, "hex has invalid length 1 after decoding; expected 32 for topic"},
		{"topic without 0x", `{"topics":["01"]}`, "hex string without 0x prefix"},
		{"number as topic", `{"topics":[1]}`, "invalid topic(s)"},
		{"number among alternatives", `{"topics":[[1]]}`, "invalid topic(s)"},
		{"object as topic", `{"topics":[{}]}`, "invalid topic(s)"},
		{"topics not an array", `{"topics":"x"}`, "json: cannot unmarshal string into Go struct field input.topics of type []interface {}"},
		{"bad address", `{"address":"0x01"}`, "invalid address: hex has invalid length 1 after decoding; expected 20 for address"},
		{"bad address in array", `{"address":["0x00000000000000000000000000000000000000aa","zz"]}`, "invalid address at index 1: hex string without 0x prefix"},
		{"non-string address", `{"address":[1]}`, "non-string address at index 0"},
		{"address object", `{"address":{}}`, "invalid addresses in query"},
		{"bad block tag", `{"fromBlock":"newest"}`, "hex string without 0x prefix"},
		{"block number as JSON number", `{"toBlock":16}`, "hex string without 0x prefix"},
		{"block number leading zero", `{"fromBlock":"0x01"}`, "hex number with leading zero digits"},
		{"block number too large", `{"fromBlock":"0x8000000000000000"}`, "block number larger than int64"},
		{"bad blockHash", `{"blockHash":"0x1"}`, "json: cannot unmarshal hex string of odd length into Go struct field input.blockHash of type common.Hash"},
		{"not an object", `[]`, "json: cannot unmarshal array into Go value of type feeds.input"},
		{"not JSON", `{`, "unexpected end of JSON input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCriteria(json.RawMessage(tc.in))
			if err == nil {
				t.Fatalf("ParseCriteria(%.80s) = %+v, want error %q", tc.in, c, tc.want)
			}
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != -32602 || !errors.Is(err, jsonrpc.ErrInvalidParams) {
				t.Fatalf("error %#v is not jsonrpc.ErrInvalidParams", err)
			}
			if err.Error() != tc.want {
				t.Errorf("error = %q, want %q", err.Error(), tc.want)
			}
		})
	}
}

func TestCriteriaMatch(t *testing.T) {
	log := &Log{Address: addrA, Topics: []common.Hash{topic1, topic2}}
	for _, tc := range []struct {
		name string
		crit string
		want bool
	}{
		{"empty", `{}`, true},
		{"address", `{"address":"` + addrA.Hex() + `"}`, true},
		{"other address", `{"address":"` + addrB.Hex() + `"}`, false},
		{"one of addresses", `{"address":["` + addrB.Hex() + `","` + addrA.Hex() + `"]}`, true},
		{"first topic", `{"topics":["` + topic1.Hex() + `"]}`, true},
		{"wrong first topic", `{"topics":["` + topic2.Hex() + `"]}`, false},
		{"wildcard then topic", `{"topics":[null,"` + topic2.Hex() + `"]}`, true},
		{"any of at position 1", `{"topics":[null,["` + topic3.Hex() + `","` + topic2.Hex() + `"]]}`, true},
		{"none of at position 1", `{"topics":[null,["` + topic3.Hex() + `","` + topic1.Hex() + `"]]}`, false},
		{"more positions than the log's topics", `{"topics":[null,null,null]}`, false},
		{"exactly the log's topic count", `{"topics":[null,null]}`, true},
		{"address and topic", `{"address":"` + addrA.Hex() + `","topics":["` + topic1.Hex() + `"]}`, true},
		{"address but not topic", `{"address":"` + addrA.Hex() + `","topics":["` + topic3.Hex() + `"]}`, false},
		{"range is not Match's", `{"fromBlock":"0x100","toBlock":"0x200"}`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseCriteria(json.RawMessage(tc.crit))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Match(log); got != tc.want {
				t.Errorf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}

// FuzzParseCriteria: ParseCriteria never panics, and accepts, refuses and reads what
// go-ethereum's FilterCriteria.UnmarshalJSON does, with the same message (its more than
// MaxAddresses addresses, which geth refuses later, aside).
func FuzzParseCriteria(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"address":"0x00000000000000000000000000000000000000aa"}`,
		`{"address":["0x00000000000000000000000000000000000000aa",1]}`,
		`{"topics":[null,["0x0000000000000000000000000000000000000000000000000000000000000001",null]]}`,
		`{"topics":[[1]]}`, `{"topics":"x","fromBlock":"bad"}`, `{"fromBlock":"earliest","toBlock":"safe"}`, `{"fromBlock":"0x10","toBlock":"pending"}`,
		`{"blockHash":"0x0000000000000000000000000000000000000000000000000000000000000001","toBlock":"latest"}`,
		`{"fromBlock":"0x10","toBlock":"pending"}`, `{"fromBlock":" latest "}`, `{"fromBlock":"0x8000000000000000"}`,
		`{"address":{},"topics":[null,null,null,null,null]}`, `{"fromBlock":"\u006catest"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := parseCriteria(data)
		var want filters.FilterCriteria
		wantErr := want.UnmarshalJSON(data)
		if len(data) == 0 {
			// geth's rpc layer reads a missing parameter as the empty filter too.
			wantErr = nil
		}
		if wantErr != nil {
			geth := strings.ReplaceAll(wantErr.Error(), "filters.input", "feeds.input")
			if err == nil || err.Error() != geth {
				t.Fatalf("parseCriteria(%q) = %v, geth: %v", data, err, wantErr)
			}
			return
		}
		if err != nil {
			if err == errExceedLogQueryLimit && len(want.Addresses) > MaxAddresses {
				return
			}
			t.Fatalf("parseCriteria(%q): %v; geth accepts it", data, err)
		}
		if len(got.Addresses) != len(want.Addresses) || (len(got.Addresses) > 0 && !reflect.DeepEqual(got.Addresses, want.Addresses)) {
			t.Fatalf("parseCriteria(%q).Addresses = %v, geth %v", data, got.Addresses, want.Addresses)
		}
		if !reflect.DeepEqual(got.Topics, want.Topics) {
			t.Fatalf("parseCriteria(%q).Topics = %v, geth %v", data, got.Topics, want.Topics)
		}
		if !reflect.DeepEqual(got.BlockHash, want.BlockHash) {
			t.Fatalf("parseCriteria(%q).BlockHash = %v, geth %v", data, got.BlockHash, want.BlockHash)
		}
		if (got.FromBlock != "") != (want.FromBlock != nil) || (got.ToBlock != "") != (want.ToBlock != nil) {
			t.Fatalf("parseCriteria(%q) range %q..%q, geth %v..%v", data, got.FromBlock, got.ToBlock, want.FromBlock, want.ToBlock)
		}
		// geth keeps a tag as its rpc.BlockNumber's value (negative), a number as itself.
		if want.FromBlock != nil && got.From.Int64() != want.FromBlock.Int64() || want.ToBlock != nil && got.To.Int64() != want.ToBlock.Int64() {
			t.Fatalf("parseCriteria(%q) range %d..%d, geth %v..%v", data, got.From, got.To, want.FromBlock, want.ToBlock)
		}
	})
}
