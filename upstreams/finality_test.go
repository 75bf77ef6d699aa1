package upstreams

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/web3gate/web3gate/e2e/anvil"
	"github.com/web3gate/web3gate/internal/wait"
)

// anvilChain starts anvil (chain 31337) with blocks mined and a set polling it every 20ms
// with finality tracking in mode (depth 10).
func anvilChain(t *testing.T, mode string, blocks int) (*anvil.Node, *Pool) {
	t.Helper()
	n := anvil.Start(t, 31337)
	mine(t, n, blocks)
	cfg := Config{PollInterval: 20 * time.Millisecond, Chains: []ChainConfig{{
		ChainID: 31337, URLs: []string{n.URL}, Finality: mode, FinalityDepth: 10,
	}}}
	s := startSet(t, cfg, Deps{TrackFinality: true})
	p, _ := s.Pool(31337)
	return n, p
}

func mine(t *testing.T, n *anvil.Node, blocks int) {
	t.Helper()
	if _, err := n.Call("anvil_mine", hexQ(uint64(blocks))); err != nil {
		t.Fatal(err)
	}
}

func hexQ(v uint64) string { return "0x" + strconv.FormatUint(v, 16) }

// awaitFinality waits until the pool's finality satisfies cond, and returns it.
func awaitFinality(t *testing.T, p *Pool, what string, cond func(Finality) bool) Finality {
	t.Helper()
	var f Finality
	wait.Within(t, 10*time.Second, what, func() bool { f = p.Finality(); return cond(f) })
	return f
}

// anvil answers the finalized tag with the block 64 below its head: auto and tag take it,
// depth takes head - finalityDepth.
func TestFinalityModesOnAnvil(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		finalized uint64
		byTag     bool
	}{
		{FinalityAuto, 100 - 64, true},
		{FinalityTag, 100 - 64, true},
		{FinalityDepth, 100 - 10, false},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			_, p := anvilChain(t, tc.mode, 100)
			f := awaitFinality(t, p, "head 100", func(f Finality) bool { return f.Known && f.Head == 100 })
			if f.Finalized != tc.finalized || f.ByTag != tc.byTag || len(f.HeadHash) != 66 {
				t.Fatalf("finality %+v, want finalized %d byTag %v and a head hash", f, tc.finalized, tc.byTag)
			}
			if p.Finalized() != tc.finalized {
				t.Fatalf("Finalized() = %d", p.Finalized())
			}
		})
	}
}

// A reorg at the same height (anvil_revert, then mining the same number of blocks again)
// changes the head hash the pool reports while the head number is the same.
func TestFinalityHeadHashSeesReorgAtSameHeight(t *testing.T) {
	n, p := anvilChain(t, FinalityAuto, 5)
	var snap string
	raw, err := n.Call("evm_snapshot")
	if err != nil || json.Unmarshal(raw, &snap) != nil {
		t.Fatalf("snapshot: %s %v", raw, err)
	}
	mine(t, n, 1)
	before := awaitFinality(t, p, "head 6", func(f Finality) bool { return f.Head == 6 })
	if raw, err := n.Call("evm_revert", snap); err != nil || string(raw) != "true" {
		t.Fatalf("revert: %s %v", raw, err)
	}
	// Another timestamp makes another block at height 6.
	if _, err := n.Call("evm_setNextBlockTimestamp", hexQ(uint64(time.Now().Unix()+1000))); err != nil {
		t.Fatal(err)
	}
	mine(t, n, 1)
	after := awaitFinality(t, p, "another block 6", func(f Finality) bool { return f.Head == 6 && f.HeadHash != before.HeadHash })
	if after.Finalized != 0 {
		t.Fatalf("finalized %d on a chain of 6 blocks (anvil's tag is 64 deep)", after.Finalized)
	}
}
