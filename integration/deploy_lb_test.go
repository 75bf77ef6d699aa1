package integration

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/testproc"
)

// TestDeployLoadBalancer runs deploy/haproxy.cfg with Debian's haproxy (`make deploy-check`
// installs it) in front of two web3gate servers, its names and ports rewritten to the
// servers' loopback addresses and nothing else changed: requests alternate between the
// replicas, and a replica whose /readyz answers 503 (its upstream found on another chain)
// is taken out of rotation by the health check on its admin port, then put back.
func TestDeployLoadBalancer(t *testing.T) {
	haproxy, err := exec.LookPath("haproxy")
	if err != nil {
		t.Fatal("haproxy is not installed: run `make deploy-check` (it installs Debian's haproxy) or apt-get install haproxy")
	}
	ups := []*fakeUpstream{newFakeUpstream(t, 1), newFakeUpstream(t, 1)}
	for _, up := range ups {
		up.result("eth_getBalance", `"0x1"`)
	}
	var replicas []*testServer
	for _, up := range ups {
		replicas = append(replicas, startServer(t, upstreamConfig("", up.srv.URL)))
	}

	raw, err := os.ReadFile("../deploy/haproxy.cfg")
	if err != nil {
		t.Fatal(err)
	}
	freePort := func() int {
		p, err := testproc.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	apiPort, statsPort := freePort(), freePort()
	cfg := string(raw)
	replace := func(re, repl string) {
		t.Helper()
		r := regexp.MustCompile(re)
		if !r.MatchString(cfg) {
			t.Fatalf("deploy/haproxy.cfg no longer has %s", re)
		}
		cfg = r.ReplaceAllLiteralString(cfg, repl)
	}
	replace(`(?m)^(\s*)bind :8545$`, fmt.Sprintf("    bind 127.0.0.1:%d", apiPort))
	replace(`(?m)^(\s*)bind :8404$`, fmt.Sprintf("    bind 127.0.0.1:%d", statsPort))
	for i, r := range replicas {
		api, admin := hostPort(t, r.API), hostPort(t, r.Admin)
		_, adminPort, _ := net.SplitHostPort(admin)
		name := fmt.Sprintf("web3gate-%d", i+1)
		replace(`(?m)^(\s*)server `+name+` `+name+`:8545$`, fmt.Sprintf("    server %s %s port %s", name, api, adminPort))
	}
	cfgPath := filepath.Join(t.TempDir(), "haproxy.cfg")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}

	var logs lockedLog
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, haproxy, "-db", "-f", cfgPath)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("haproxy output:\n%s", logs.String())
		}
	})
	lb := fmt.Sprintf("http://127.0.0.1:%d", apiPort)
	stats := fmt.Sprintf("http://127.0.0.1:%d/stats;csv", statsPort)

	waitStatus(t, stats, "UP", "UP")
	counts := func() [2]int { return [2]int{ups[0].count("eth_getBalance"), ups[1].count("eth_getBalance")} }
	send := func(n int) {
		t.Helper()
		for i := range n {
			code, _, body := post(t, lb+"/v1/web3/mainnet", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}`, i))
			if code != 200 || !strings.Contains(string(body), `"result":"0x1"`) {
				t.Fatalf("through the load balancer: %d %s", code, body)
			}
		}
	}

	before := counts()
	send(10)
	after := counts()
	if got := [2]int{after[0] - before[0], after[1] - before[1]}; got != [2]int{5, 5} {
		t.Errorf("10 requests reached the replicas %v times, want round robin [5 5]", got)
	}

	// Replica 2's node now answers for another chain: its /readyz says 503 and HAProxy
	// takes it out.
	ups[1].result("eth_chainId", `"0x5"`)
	waitStatus(t, stats, "UP", "DOWN")
	if code, body := get(t, replicas[1].Admin+"/readyz"); code != 503 {
		t.Errorf("replica 2 readyz %d %s, want 503", code, body)
	}
	before = counts()
	send(10)
	after = counts()
	if got := [2]int{after[0] - before[0], after[1] - before[1]}; got != [2]int{10, 0} {
		t.Errorf("with replica 2 not ready, 10 requests reached the replicas %v times, want [10 0]", got)
	}

	ups[1].result("eth_chainId", `"0x1"`)
	waitStatus(t, stats, "UP", "UP")
	before = counts()
	send(4)
	after = counts()
	if got := [2]int{after[0] - before[0], after[1] - before[1]}; got != [2]int{2, 2} {
		t.Errorf("replica 2 ready again: 4 requests reached the replicas %v times, want [2 2]", got)
	}
}

// waitStatus waits until HAProxy's stats show the two servers of backend web3gate with
// these statuses ("UP", "DOWN"), for at most 60 seconds (each change takes two health
// checks 2 s apart).
func waitStatus(t *testing.T, statsURL string, want1, want2 string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last string
	for {
		got, err := serverStatus(statsURL)
		if err == nil && got[0] == want1 && got[1] == want2 {
			return
		}
		last = fmt.Sprint(got, err)
		if time.Now().After(deadline) {
			t.Fatalf("HAProxy's servers: %s, want [%s %s] within 60s", last, want1, want2)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func serverStatus(statsURL string) ([2]string, error) {
	var got [2]string
	resp, err := http.Get(statsURL)
	if err != nil {
		return got, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return got, err
	}
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(b, []byte("# "))))
	r.FieldsPerRecord = -1
	rows, err := r.ReadAll()
	if err != nil || len(rows) == 0 {
		return got, fmt.Errorf("stats csv: %v", err)
	}
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, row := range rows[1:] {
		if row[col["pxname"]] != "web3gate" {
			continue
		}
		switch row[col["svname"]] {
		case "web3gate-1":
			got[0] = strings.Fields(row[col["status"]])[0]
		case "web3gate-2":
			got[1] = strings.Fields(row[col["status"]])[0]
		}
	}
	return got, nil
}

func hostPort(t *testing.T, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}
