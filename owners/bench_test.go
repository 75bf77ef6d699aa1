package owners

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/store"
)

// Benchmarks for profiling the ingest path (go test -bench . -cpuprofile); bench/owners.go
// measures the whole pipeline against anvil. Timings are never asserted.

// benchTransfers is one batch as the bench's emitter makes them: 20,000 transfers, 70 %
// ERC721 mints, 20 % ERC721 moves of earlier ids, 10 % ERC1155 mints, ids growing from
// first, 5,000 holders.
func benchTransfers(first uint64) []transfer {
	const n = 20000
	holder := func(i uint64) common.Address {
		var a common.Address
		a[18], a[19] = byte((0x1000+i%5000)>>8), byte(0x1000+i%5000)
		return a
	}
	c721, c1155 := common.Address{0xc1}, common.Address{0xc2}
	out := make([]transfer, 0, n)
	for i := uint64(0); i < n; i++ {
		id := first + i
		t := transfer{block: id / 1000, contract: c721, to: holder(id), standard: store.StandardERC721}
		switch {
		case i%10 < 7:
		case i%10 < 9:
			t.from, t.to = holder(id), holder(id+1)
			if id >= 10 {
				t.id.SetUint64(id - 10)
			}
		default:
			t.contract, t.standard = c1155, store.StandardERC1155
		}
		if t.id.IsZero() {
			t.id.SetUint64(id)
		}
		t.amount.SetOne()
		out = append(out, t)
	}
	return out
}

// BenchmarkWrite: the store write of one batch of 20,000 transfers (one transaction), on a
// table that grows by each batch. logs/s is the figure of the target (50,000).
func BenchmarkWrite(b *testing.B) {
	db := openStoreB(b)
	ctx := context.Background()
	first := uint64(0)
	b.ResetTimer()
	for b.Loop() {
		ts := benchTransfers(first)
		first += uint64(len(ts))
		if err := db.Write(ctx, func(tx *store.DBTx) error {
			_, err := applyTransfers(ctx, tx, 1, ts, 1<<62)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(first)/b.Elapsed().Seconds(), "logs/s")
}

// BenchmarkParseLogs: parsing an eth_getLogs answer of 20,000 ERC721 logs.
func BenchmarkParseLogs(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("[")
	for i := range 20000 {
		if i > 0 {
			sb.WriteString(",")
		}
		fmt.Fprintf(&sb, `{"address":"0x5fbdb2315678afecb367f032d93f642f64180aa3","topics":["%s","%s","%s","%s"],"data":"0x",`+
			`"blockHash":"0x%064x","blockNumber":"0x%x","blockTimestamp":"0x6920a1b3","transactionHash":"0x%064x","transactionIndex":"0x0","logIndex":"0x%x","removed":false}`,
			topicTransfer.Hex(), word(""), addrWord(holderA), word(fmt.Sprintf("%x", i)), 1+i/1000, 1+i/1000, i, i%1000)
	}
	sb.WriteString("]")
	raw := []byte(sb.String())
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for b.Loop() {
		lb, err := parseLogs(raw, 0, 1000)
		if err != nil || len(lb.transfers) != 20000 {
			b.Fatalf("%v, %d transfers", err, len(lb.transfers))
		}
	}
	b.ReportMetric(20000*float64(b.N)/b.Elapsed().Seconds(), "logs/s")
}

func openStoreB(b *testing.B) *store.DB {
	b.Helper()
	sc := store.Config{Path: b.TempDir() + "/web3gate.db"}
	sc.SetDefaults()
	db, err := store.Open(context.Background(), sc, store.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}
