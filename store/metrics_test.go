package store

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap/zaptest"
)

// TestStoreUp: web3gate_store_up is 1 while the database answers and 0 once it cannot
// (the pools closed).
func TestStoreUp(t *testing.T) { forEachBackend(t, testStoreUp) }

func testStoreUp(t *testing.T, be backend) {
	db, err := Open(context.Background(), backendConfig(t, be), Deps{Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	db.RegisterMetrics(reg, 5*time.Second)
	want := func(v int) string {
		return fmt.Sprintf("# HELP web3gate_store_up 1 when the store's database answered a query within admin.readyTimeout at this scrape, else 0.\n"+
			"# TYPE web3gate_store_up gauge\nweb3gate_store_up{driver=%q} %d\n", string(be), v)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(1)), "web3gate_store_up"); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want(0)), "web3gate_store_up"); err != nil {
		t.Fatal(err)
	}
}

// TestCountOpenTxs: the rows of a chain not settled yet, by state; settled rows and other
// chains' rows are not counted.
func TestCountOpenTxs(t *testing.T) { forEachBackend(t, testCountOpenTxs) }

func testCountOpenTxs(t *testing.T, be backend) {
	ctx := context.Background()
	db := openBackend(t, be)
	rows := chainRows(t, db, 5, addrN(12))
	chainRows(t, db, 6, addrN(12))
	if err := db.Write(ctx, func(dbtx *DBTx) error {
		return dbtx.SetState(ctx, rows[StateBroadcast].ID, []string{StateBroadcast}, StateStuck, "priced out")
	}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		chain uint64
		want  map[string]int
	}{
		{5, map[string]int{StateReserved: 1, StateSigned: 1, StateHandedOut: 1, StateStuck: 1, StateMined: 1}},
		{6, map[string]int{StateReserved: 1, StateSigned: 1, StateHandedOut: 1, StateBroadcast: 1, StateMined: 1}},
		{7, map[string]int{}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.chain), func(t *testing.T) {
			var got map[string]int
			if err := db.Read(ctx, func(dbtx *DBTx) (err error) {
				got, err = dbtx.CountOpenTxs(ctx, tt.chain)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}
