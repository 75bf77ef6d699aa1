package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testengine"
)

// TestVersionsLifecycle: versions of a request are stored before they are broadcast, counted
// on the request, raise its max cost (the in-flight sums follow, stuck rows counted too), and
// whichever version a block takes settles the request: mined for a bump, cancelled for a
// cancel, its hash as the mined hash and the others replaced; a reorg undoes it.
func TestVersionsLifecycle(t *testing.T) { forEachBackend(t, testVersionsLifecycle) }

func testVersionsLifecycle(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	addr := addrN(11)
	write := func(fn func(dbtx *DBTx) error) {
		t.Helper()
		if err := db.Write(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	inFlight := func() (int, *big.Int) {
		t.Helper()
		var n int
		var sum *big.Int
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			n, sum, err = dbtx.InFlight(ctx, 1, addr)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return n, sum
	}
	read := func(id int64) *TxRecord {
		t.Helper()
		var rec *TxRecord
		if err := db.Read(ctx, func(dbtx *DBTx) error {
			var err error
			rec, err = dbtx.TxByID(ctx, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rec
	}

	rec := testRecord(1, addr, 0)
	rec.MaxCost = big.NewInt(1000)
	rec.FeeBump = FeeBumpAllow
	orig := common.HexToHash("0x01")
	write(func(dbtx *DBTx) error { return dbtx.InsertTx(ctx, rec) })
	write(func(dbtx *DBTx) error { return dbtx.SetSigned(ctx, rec.ID, []byte{1}, orig, StateSigned) })
	write(func(dbtx *DBTx) error { return dbtx.SetState(ctx, rec.ID, []string{StateSigned}, StateBroadcast, "") })
	rec = read(rec.ID)
	if rec.FeeBump != FeeBumpAllow || rec.Versions != 0 || rec.MinedHash != (common.Hash{}) {
		t.Fatalf("stored request: %+v", rec)
	}

	// Stuck is in flight.
	write(func(dbtx *DBTx) error { return dbtx.SetState(ctx, rec.ID, []string{StateBroadcast}, StateStuck, "") })
	if n, sum := inFlight(); n != 1 || sum.Int64() != 1000 {
		t.Fatalf("stuck: in flight %d costing %v", n, sum)
	}
	rec = read(rec.ID)

	bump := &TxVersion{Kind: VersionBump, Fields: []byte(`{"b":1}`), MaxCost: big.NewInt(1500), Raw: []byte{2}, Hash: common.HexToHash("0x02")}
	write(func(dbtx *DBTx) error { return dbtx.AddVersion(ctx, rec, bump) })
	if stored := read(rec.ID); bump.Seq != 1 || rec.Versions != 1 || rec.State != StateBroadcast || stored.State != StateBroadcast ||
		stored.Versions != 1 || stored.MaxCost.Int64() != 1500 {
		t.Fatalf("after a bump: version %+v, request %+v, stored %+v", bump, rec, stored)
	}
	if n, sum := inFlight(); n != 1 || sum.Int64() != 1500 {
		t.Fatalf("bumped: in flight %d costing %v, want 1 costing 1500", n, sum)
	}
	// A writer that read the request before that bump loses the race.
	stale := *rec
	stale.Versions = 0
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.AddVersion(ctx, &stale, &TxVersion{Kind: VersionBump, Fields: []byte(`{}`), MaxCost: big.NewInt(1), Raw: []byte{9}, Hash: common.HexToHash("0x09")})
	}); !errors.Is(err, ErrVersionRace) {
		t.Fatalf("a stale version count: %v", err)
	}
	// A cheaper version leaves the max cost at the highest.
	cancel := &TxVersion{Kind: VersionCancel, Fields: []byte(`{"c":1}`), MaxCost: big.NewInt(1200), Raw: []byte{3}, Hash: common.HexToHash("0x03")}
	write(func(dbtx *DBTx) error { return dbtx.AddVersion(ctx, rec, cancel) })
	write(func(dbtx *DBTx) error { return dbtx.SetVersionBroadcast(ctx, rec.ID, cancel.Seq) })
	if n, sum := inFlight(); n != 1 || sum.Int64() != 1500 {
		t.Fatalf("a cheaper version: in flight %d costing %v, want 1 costing 1500", n, sum)
	}

	err := db.Read(ctx, func(dbtx *DBTx) error {
		open, err := dbtx.OpenVersionHashes(ctx, 1)
		if err != nil {
			return err
		}
		if len(open) != 2 || open[bump.Hash] != rec.ID || open[cancel.Hash] != rec.ID {
			t.Errorf("open version hashes: %v", open)
		}
		vs, err := dbtx.Versions(ctx, rec.ID)
		if err != nil {
			return err
		}
		if len(vs) != 2 || vs[0].Hash != bump.Hash || vs[0].State != VersionSigned || vs[1].State != VersionBroadcast ||
			vs[1].Kind != VersionCancel || string(vs[1].Raw) != "\x03" || vs[0].MaxCost.Int64() != 1500 {
			t.Errorf("versions: %+v %+v", vs[0], vs[1])
		}
		byHash, err := dbtx.VersionsByHash(ctx, cancel.Hash)
		if err != nil || len(byHash) != 1 || byHash[0].TxID != rec.ID {
			t.Errorf("by hash: %v %v", byHash, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// The cancel is mined: cancelled, out of flight; a reorg brings it back; then the bump
	// is mined in another block.
	blockA, blockB := common.HexToHash("0xa0"), common.HexToHash("0xb0")
	write(func(dbtx *DBTx) error {
		n, err := dbtx.SetMinedVersion(ctx, 1, cancel.Hash, 5, blockA)
		if n != 1 {
			t.Errorf("SetMinedVersion changed %d rows", n)
		}
		return err
	})
	if got := read(rec.ID); got.State != StateCancelled || got.MinedHash != cancel.Hash || got.BlockNumber != 5 {
		t.Fatalf("after the cancel was mined: %+v", got)
	}
	if n, sum := inFlight(); n != 0 || sum.Sign() != 0 {
		t.Fatalf("cancelled: in flight %d costing %v", n, sum)
	}
	write(func(dbtx *DBTx) error { _, err := dbtx.Unmine(ctx, 1, 5, blockA); return err })
	if got := read(rec.ID); got.State != StateBroadcast || got.MinedHash != (common.Hash{}) {
		t.Fatalf("after the reorg: %+v", got)
	}
	if n, sum := inFlight(); n != 1 || sum.Int64() != 1500 {
		t.Fatalf("after the reorg: in flight %d costing %v", n, sum)
	}
	write(func(dbtx *DBTx) error { _, err := dbtx.SetMinedVersion(ctx, 1, bump.Hash, 6, blockB); return err })
	got := read(rec.ID)
	if got.State != StateMined || got.MinedHash != bump.Hash || got.Hash != orig {
		t.Fatalf("after the bump was mined: %+v", got)
	}
	for _, c := range []struct {
		hash common.Hash
		want string
	}{{orig, VersionReplaced}, {bump.Hash, VersionMined}, {cancel.Hash, VersionReplaced}} {
		if s := VersionState(got, c.hash, VersionBroadcast); s != c.want {
			t.Errorf("version %s: %s, want %s", c.hash.Hex(), s, c.want)
		}
	}
	err = db.Read(ctx, func(dbtx *DBTx) error {
		open, err := dbtx.OpenVersionHashes(ctx, 1)
		if len(open) != 0 {
			t.Errorf("open version hashes of a mined request: %v", open)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// A mined request takes no more versions.
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.AddVersion(ctx, got, &TxVersion{Kind: VersionBump, Fields: []byte(`{}`), MaxCost: big.NewInt(1), Raw: []byte{9}, Hash: common.HexToHash("0x09")})
	}); !errors.Is(err, ErrVersionRace) {
		t.Fatalf("a version of a mined request: %v", err)
	}
}

// TestSetMinedRecordsMinedHash: a request mined by its original hash records it as the mined
// hash, and a stuck one is mined like a broadcast one.
func TestSetMinedRecordsMinedHash(t *testing.T) { forEachBackend(t, testSetMinedRecordsMinedHash) }

func testSetMinedRecordsMinedHash(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	rec := testRecord(1, addrN(12), 0)
	hash := common.HexToHash("0x42")
	err := db.Write(ctx, func(dbtx *DBTx) error {
		if err := dbtx.InsertTx(ctx, rec); err != nil {
			return err
		}
		if err := dbtx.SetSigned(ctx, rec.ID, []byte{1}, hash, StateSigned); err != nil {
			return err
		}
		if err := dbtx.SetState(ctx, rec.ID, []string{StateSigned}, StateStuck, ""); err != nil {
			return err
		}
		n, err := dbtx.SetMined(ctx, 1, hash, 3, common.HexToHash("0x3"))
		if n != 1 {
			t.Errorf("SetMined of a stuck row changed %d rows", n)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Read(ctx, func(dbtx *DBTx) error {
		got, err := dbtx.TxByID(ctx, rec.ID)
		if err != nil {
			return err
		}
		if got.State != StateMined || got.MinedHash != hash {
			t.Errorf("mined: %+v", got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// BenchmarkBlockScan measures the confirmer's recording of one block of 200 of our
// transactions, none with versions (the common path): "before" is the scan as it was (one
// SetMined per hash), "after" the scan with fee bumping (the read of open version hashes,
// then SetMined per hash and one read of the rows mined, for the metrics). Each iteration mines the rows in
// another block, so every statement changes every row.
func BenchmarkBlockScan(b *testing.B) {
	const rows = 200
	for _, be := range backends {
		for _, mode := range []string{"before", "after"} {
			b.Run(string(be)+"/"+mode, func(b *testing.B) {
				db := openBench(b, be)
				ctx := context.Background()
				hashes := make([]common.Hash, rows)
				err := db.Write(ctx, func(dbtx *DBTx) error {
					for i := range hashes {
						r := testRecord(1, addrN(300+i%16), uint64(i))
						if err := dbtx.InsertTx(ctx, r); err != nil {
							return err
						}
						hashes[i] = common.BigToHash(big.NewInt(int64(1000 + i)))
						if err := dbtx.SetSigned(ctx, r.ID, []byte{1}, hashes[i], StateBroadcast); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					block := common.BigToHash(big.NewInt(int64(i + 1)))
					since := time.Now()
					if mode == "after" {
						if err := db.Read(ctx, func(dbtx *DBTx) error { _, err := dbtx.OpenVersionHashes(ctx, 1); return err }); err != nil {
							b.Fatal(err)
						}
					}
					err := db.Write(ctx, func(dbtx *DBTx) error {
						for _, h := range hashes {
							n, err := dbtx.SetMined(ctx, 1, h, uint64(i+1), block)
							if err != nil {
								return err
							}
							if n != 1 {
								return fmt.Errorf("%d rows mined for one hash", n)
							}
						}
						return nil
					})
					if err != nil {
						b.Fatal(err)
					}
					if mode == "after" {
						if err := db.Read(ctx, func(dbtx *DBTx) error {
							ms, err := dbtx.MinedIn(ctx, 1, uint64(i+1), uint64(i+1), since)
							if len(ms) != rows {
								return fmt.Errorf("%d rows read mined, want %d", len(ms), rows)
							}
							return err
						}); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

func openBench(b *testing.B, be backend) *DB {
	b.Helper()
	var cfg Config
	if be == postgresBackend {
		cfg = Config{Driver: DriverPostgres, DSN: testengine.Postgres(b)}
	} else {
		cfg = Config{Path: b.TempDir() + "/bench.db"}
	}
	cfg.SetDefaults()
	db, err := open(context.Background(), cfg, Deps{}, options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	return db
}
