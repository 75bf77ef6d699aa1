package owners

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"
	"github.com/holiman/uint256"

	"github.com/web3gate/web3gate/store"
)

const (
	blockHash = "0x" + "bb00000000000000000000000000000000000000000000000000000000000000"
	contractA = "0x00000000000000000000000000000000000000c1"
)

func word(hexDigits string) string { return "0x" + strings.Repeat("0", 64-len(hexDigits)) + hexDigits }

func addrWord(a string) string { return word(strings.TrimPrefix(a, "0x")) }

// logJSON is one log of block 5 of contract A.
func logJSON(topics []string, data string) string {
	return fmt.Sprintf(`{"address":%q,"blockNumber":"0x5","blockHash":%q,"data":%q,"topics":["%s"],"removed":false,"logIndex":"0x0"}`,
		contractA, blockHash, data, strings.Join(topics, `","`))
}

var (
	holderA = "0x00000000000000000000000000000000000000a1"
	holderB = "0x00000000000000000000000000000000000000a2"
	zero    = "0x0000000000000000000000000000000000000000"
)

func TestParseLogs(t *testing.T) {
	transfer721 := topicTransfer.Hex()
	single, batch := topicTransferSingle.Hex(), topicTransferBatch.Hex()
	batchData := func(ids, values []string) string {
		var b strings.Builder
		b.WriteString("0x")
		b.WriteString(word("40")[2:])
		b.WriteString(word(fmt.Sprintf("%x", 0x60+32*len(ids)))[2:])
		for _, list := range [][]string{ids, values} {
			b.WriteString(word(fmt.Sprintf("%x", len(list)))[2:])
			for _, v := range list {
				b.WriteString(word(v)[2:])
			}
		}
		return b.String()
	}
	for _, c := range []struct {
		name  string
		log   string
		kind  int
		want  []string // contract/id/from/to/amount/standard
		empty bool
	}{
		{"ERC721 mint", logJSON([]string{transfer721, addrWord(zero), addrWord(holderA), word("2a")}, "0x"), kindERC721,
			[]string{"c1/0x2a/00/a1/1/721"}, false},
		{"ERC721 burn", logJSON([]string{transfer721, addrWord(holderA), addrWord(zero), word("2a")}, "0x"), kindERC721,
			[]string{"c1/0x2a/a1/00/1/721"}, false},
		{"ERC20 Transfer (three topics)", logJSON([]string{transfer721, addrWord(holderA), addrWord(holderB)}, word("64")), kindIgnored, nil, true},
		{"another event", logJSON([]string{word("1234"), addrWord(holderA)}, "0x"), kindIgnored, nil, true},
		{"no topics", fmt.Sprintf(`{"address":%q,"blockNumber":"0x5","blockHash":%q,"data":"0x","topics":[]}`, contractA, blockHash), kindIgnored, nil, true},
		{"TransferSingle", logJSON([]string{single, addrWord(holderB), addrWord(holderA), addrWord(holderB)}, "0x"+word("7")[2:]+word("ff")[2:]),
			kindERC1155Single, []string{"c1/0x7/a1/a2/255/1155"}, false},
		{"TransferBatch", logJSON([]string{batch, addrWord(holderB), addrWord(zero), addrWord(holderA)}, batchData([]string{"1", "2"}, []string{"a", "b"})),
			kindERC1155Batch, []string{"c1/0x1/00/a1/10/1155", "c1/0x2/00/a1/11/1155"}, false},
		{"TransferBatch, no ids", logJSON([]string{batch, addrWord(holderB), addrWord(zero), addrWord(holderA)}, batchData(nil, nil)),
			kindERC1155Batch, nil, true},
		{"ERC721 with data", logJSON([]string{transfer721, addrWord(zero), addrWord(holderA), word("1")}, word("1")), kindMalformed, nil, true},
		{"ERC721 address topic with high bytes", logJSON([]string{transfer721, word("1" + strings.Repeat("0", 63)), addrWord(holderA), word("1")}, "0x"), kindMalformed, nil, true},
		{"TransferSingle, short data", logJSON([]string{single, addrWord(holderB), addrWord(holderA), addrWord(holderB)}, word("7")), kindMalformed, nil, true},
		{"TransferSingle, three topics", logJSON([]string{single, addrWord(holderA), addrWord(holderB)}, "0x"+word("7")[2:]+word("1")[2:]), kindMalformed, nil, true},
		{"TransferBatch, lengths differ", logJSON([]string{batch, addrWord(holderB), addrWord(zero), addrWord(holderA)}, batchData([]string{"1", "2"}, []string{"a"})),
			kindMalformed, nil, true},
		{"TransferBatch, offset past the data", logJSON([]string{batch, addrWord(holderB), addrWord(zero), addrWord(holderA)}, "0x"+word("1000")[2:]+word("40")[2:]),
			kindMalformed, nil, true},
		{"TransferBatch, huge length", logJSON([]string{batch, addrWord(holderB), addrWord(zero), addrWord(holderA)},
			"0x"+word("40")[2:]+word("60")[2:]+word("ffffffffffffffff")[2:]), kindMalformed, nil, true},
		{"odd hex data", logJSON([]string{single, addrWord(holderB), addrWord(holderA), addrWord(holderB)}, "0x123"), kindMalformed, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := parseLogs([]byte("["+c.log+"]"), 5, 5)
			if err != nil {
				t.Fatal(err)
			}
			if b.kinds[c.kind] != 1 {
				t.Errorf("kinds = %v, want one of kind %s", b.kinds, kindNames[c.kind])
			}
			var got []string
			for _, tr := range b.transfers {
				got = append(got, fmt.Sprintf("%x/%s/%x/%x/%s/%d", tr.contract[19:], tr.id.Hex(), tr.from[19:], tr.to[19:], tr.amount.Dec(), tr.standard))
			}
			if strings.Join(got, " ") != strings.Join(c.want, " ") || (len(got) == 0) != c.empty {
				t.Errorf("transfers = %v, want %v", got, c.want)
			}
			if b.blockHashes[5] != common.HexToHash(blockHash) {
				t.Errorf("block hash of 5 = %s", b.blockHashes[5])
			}
		})
	}
}

func TestParseLogsRefusesInconsistentAnswers(t *testing.T) {
	good := logJSON([]string{topicTransfer.Hex(), addrWord(zero), addrWord(holderA), word("1")}, "0x")
	for _, c := range []struct{ name, body string }{
		{"not an array", `{"a":1}`},
		{"a log not an object", `[1]`},
		{"block outside the range", "[" + strings.Replace(good, `"0x5"`, `"0x9"`, 1) + "]"},
		{"no block number", "[" + strings.Replace(good, `"blockNumber":"0x5",`, "", 1) + "]"},
		{"two hashes for one block", "[" + good + "," + strings.Replace(good, "bb00", "cc00", 1) + "]"},
		{"removed log", "[" + strings.Replace(good, `"removed":false`, `"removed":true`, 1) + "]"},
		{"bad address", "[" + strings.Replace(good, contractA, "0x12", 1) + "]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseLogs([]byte(c.body), 5, 5)
			if err == nil {
				t.Fatal("accepted")
			}
			if c.name != "not an array" && !errors.Is(err, errInconsistent) {
				t.Errorf("error %v is not errInconsistent", err)
			}
		})
	}
}

// FuzzParseLogs: any answer is parsed or refused, never a panic; a parsed answer holds only
// transfers of the requested blocks with the standards' shapes.
func FuzzParseLogs(f *testing.F) {
	f.Add([]byte("[" + logJSON([]string{topicTransfer.Hex(), addrWord(zero), addrWord(holderA), word("1")}, "0x") + "]"))
	f.Add([]byte("[" + logJSON([]string{topicTransferBatch.Hex(), addrWord(holderB), addrWord(zero), addrWord(holderA)},
		"0x"+word("40")[2:]+word("80")[2:]+word("1")[2:]+word("1")[2:]+word("1")[2:]+word("2")[2:]) + "]"))
	f.Add([]byte(`[{"blockNumber":"0x5"}]`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := parseLogs(raw, 5, 5)
		if err != nil {
			return
		}
		for _, tr := range b.transfers {
			if tr.block != 5 || (tr.standard != store.StandardERC721 && tr.standard != store.StandardERC1155) ||
				(tr.standard == store.StandardERC721 && !tr.amount.Eq(uint256.NewInt(1))) {
				t.Fatalf("transfer %+v", tr)
			}
		}
	})
}
