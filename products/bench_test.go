package products

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/web3gate/web3gate/store"
)

// benchCatalog opens a store holding n generated products (liveAt over three years, a
// thousand creators, the four sale types, a quarter of the limited editions sold out).
func benchCatalog(b *testing.B, n int) *store.DB {
	b.Helper()
	ctx := context.Background()
	sc := store.Config{Path: filepath.Join(b.TempDir(), "web3gate.db")}
	sc.SetDefaults()
	db, err := store.Open(ctx, sc, store.Deps{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	types := []string{LimitedEdition, LimitedEdition, OpenEdition, OpenEdition, OffChainAuction, OnChainAuction}
	err = db.Write(ctx, func(tx *store.DBTx) error {
		for i := range n {
			p, err := Parse(benchDoc(i))
			if err != nil {
				return err
			}
			u := fmt.Sprintf("creator%d", rng.IntN(1000))
			live := testNow.Add(-time.Duration(rng.Int64N(int64(3 * 365 * 24 * time.Hour))))
			p.Username, p.LiveAt, p.SaleType = &u, &live, types[rng.IntN(len(types))]
			p.TotalAvailable = nil
			if p.SaleType == LimitedEdition {
				a := int64(100)
				p.TotalAvailable, p.TotalSold = &a, rng.Int64N(100)
				if rng.IntN(4) == 0 {
					p.TotalSold = 100
				}
			}
			r, err := p.row()
			if err != nil {
				return err
			}
			if _, err := tx.PutProduct(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return db
}

func benchDoc(i int) []byte {
	var m map[string]any
	_ = json.Unmarshal([]byte(goodProduct), &m)
	m["id"] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	m["tokenMetadata"] = map[string]any{"name": fmt.Sprintf("Work %d", i), "description": "Generated product of the benchmark catalog.",
		"image": fmt.Sprintf("ipfs://bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi/%d.png", i), "attributes": []any{}, "properties": map[string]any{}}
	b, _ := json.Marshal(m)
	return b
}

// BenchmarkList: the list's query and answer body over 100,000 products, for profiling
// (go test -run '^$' -bench List -cpuprofile cpu.out ./products); seeding takes a while.
func BenchmarkList(b *testing.B) {
	db := benchCatalog(b, 100_000)
	ctx := context.Background()
	yes := true
	for _, c := range []struct {
		name string
		f    store.ProductFilter
	}{
		{"none", store.ProductFilter{}},
		{"creator", store.ProductFilter{Creator: "creator7"}},
		{"sold", store.ProductFilter{Sold: &yes}},
		{"offset 5000", store.ProductFilter{Offset: 5000}},
		{"limit 100", store.ProductFilter{Limit: 100}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := c.f
			f.LiveAt = testNow
			if f.Limit == 0 {
				f.Limit = 20
			}
			b.ReportAllocs()
			for b.Loop() {
				list, err := db.Products(ctx, f)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := listBody(list); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
