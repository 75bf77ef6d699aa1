package integration

import (
	"bufio"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"
)

// TestReplicaAndLeases: every log line carries the replica id; a single process takes the
// lease of each chain's confirmer and owners indexer at start (within the grace of a
// PostgreSQL lease) and shows them in its metrics
// and at /leases; it releases them when it stops.
func TestReplicaAndLeases(t *testing.T) {
	cfg := strings.Replace(withAdminToken(t, devConfig(t)), "level: warn", "level: info", 1)
	cfg = strings.Replace(cfg, "\ncluster:\n", "\ncluster:\n  replicaId: replica-7\n", 1)
	if !strings.Contains(cfg, "replicaId: replica-7") || !strings.Contains(cfg, "level: info") {
		t.Fatal("config.yaml changed: the cluster test settings were not applied")
	}
	logs := &lockedLog{}
	ts := startServerIn(t, cfg, t.TempDir(), logs)

	// On PostgreSQL a new holder starts its job after a grace of half a check interval.
	var code int
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = get(t, ts.Admin+"/metrics")
		if code != 200 {
			t.Fatalf("metrics %d", code)
		}
		if strings.Contains(body, `web3gate_lease_held{lease="confirmer/1337"} 1`) &&
			strings.Contains(body, `web3gate_lease_held{lease="owners-indexer/1337"} 1`) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{
		`web3gate_replica_info{replica="replica-7"} 1`,
		`web3gate_lease_held{lease="confirmer/1337"} 1`,
		`web3gate_lease_held{lease="owners-indexer/1337"} 1`,
		`web3gate_lease_acquisitions_total{lease="confirmer/1337"} 1`,
		`web3gate_lease_losses_total{lease="confirmer/1337"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	code, body = get(t, ts.Admin+"/leases", adminAuth...)
	var held struct {
		Replica string
		Leases  []struct {
			Name  string
			Epoch int64
		}
	}
	if code != 200 || json.Unmarshal([]byte(body), &held) != nil || held.Replica != "replica-7" || len(held.Leases) != 2 ||
		held.Leases[0].Name != "confirmer/1337" || held.Leases[1].Name != "owners-indexer/1337" ||
		os.Getenv("WEB3GATE_TEST_STORE") != "postgres" && held.Leases[0].Epoch != 1 { // advisory locks have no epoch
		t.Fatalf("/leases: %d %s", code, body)
	}

	ts.stop()
	var acquired, released int
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	lines := 0
	for sc.Scan() {
		lines++
		var l map[string]any
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if l["replica"] != "replica-7" {
			t.Errorf("log line without the replica id: %s", sc.Text())
		}
		switch l["msg"] {
		case "lease acquired":
			acquired++
		case "lease released":
			released++
		}
	}
	if lines < 5 || acquired != 2 || released != 2 {
		t.Fatalf("%d log lines, %d leases acquired, %d released; want 2 and 2:\n%s", lines, acquired, released, logs.String())
	}
}
