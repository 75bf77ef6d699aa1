// Package deploy holds the deployment example (compose.yaml, HAProxy, Prometheus, Grafana)
// and its tests.
package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/internal/testengine"
	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/internal/wait"
)

// The files under test, relative to this directory.
const (
	dashboardFile = "grafana/dashboards/web3gate.json"
	alertsFile    = "prometheus/alerts.yml"
)

// The build's linker values, checked in web3gate_build_info.
const (
	testVersion  = "v0.0.0-monitoring-test"
	testRevision = "0123456789abcdef0123456789abcdef01234567"
)

// prometheusOwn are the series Prometheus makes itself that the alerts may use: up is 0 for
// a target it could not scrape.
var prometheusOwn = []string{"up"}

// TestDashboardAndAlerts runs every PromQL expression of the Grafana dashboard and of the
// alerting rules on a real Prometheus scraping a real web3gate (the built binary on the
// embedded dev chain, with Redis): each must parse and evaluate, and each metric it names
// must be one web3gate exports. The rules file must pass promtool and be evaluated by
// Prometheus without error.
func TestDashboardAndAlerts(t *testing.T) {
	promBin, promtool := lookPath(t, "prometheus"), lookPath(t, "promtool")
	if out, err := exec.Command(promtool, "check", "rules", alertsFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules %s: %v\n%s", alertsFile, err, out)
	}
	exprs := append(dashboardExprs(t), alertExprs(t)...)

	g := startWeb3gate(t)
	g.traffic(t)
	prom := startPrometheus(t, promBin, promtool, g.admin)
	// Scraped: the build's series is there, with the linker's values.
	wait.Within(t, 60*time.Second, "Prometheus scraping web3gate", func() bool {
		r, err := prom.query(`web3gate_build_info{job="web3gate"}`)
		return err == nil && len(r) == 1
	})
	r, err := prom.query(`web3gate_build_info{job="web3gate"}`)
	if err != nil {
		t.Fatal(err)
	}
	if l := r[0].Metric; l["version"] != testVersion || l["revision"] != testRevision || !strings.HasPrefix(l["goversion"], "go") {
		t.Errorf("web3gate_build_info labels %v, want version %s, revision %s", l, testVersion, testRevision)
	}

	exported := prom.exportedNames(t)
	for _, e := range exprs {
		t.Run(e.where, func(t *testing.T) {
			q := substitute(e.expr)
			if _, err := prom.query(q); err != nil {
				t.Fatalf("%s\nquery %s: %v", e.expr, q, err)
			}
			names, err := metricNames(q)
			if err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if len(names) == 0 {
				t.Fatalf("%s: names no metric", q)
			}
			for _, n := range names {
				if !exported[n] {
					t.Errorf("%s: metric %s is not exported by web3gate (not in the scraped metadata)", e.expr, n)
				}
			}
		})
	}

	// Prometheus evaluates every rule of the file without error.
	var rules []promRule
	wait.Within(t, 60*time.Second, "every alerting rule evaluated", func() bool {
		rules = prom.rules(t)
		for _, r := range rules {
			if r.LastEvaluation.IsZero() || r.LastEvaluation.Year() < 2000 {
				return false
			}
		}
		return len(rules) > 0
	})
	if want := len(alertExprs(t)); len(rules) != want {
		t.Errorf("Prometheus loaded %d rules, the file has %d", len(rules), want)
	}
	for _, r := range rules {
		if r.Health != "ok" {
			t.Errorf("rule %s: health %q: %s", r.Name, r.Health, r.LastError)
		}
	}
}

func lookPath(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: install Debian's prometheus package (make test does, with scripts/monitoring-check.sh): %v", name, err)
	}
	return p
}

type expr struct{ where, expr string }

// dashboardExprs are the expressions of every panel's targets and of the query variables.
func dashboardExprs(t *testing.T) []expr {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		Title   string   `json:"title"`
		Type    string   `json:"type"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var d struct {
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var out []expr
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("dashboard panel %q has no query", p.Title)
			}
			for i, tg := range p.Targets {
				if strings.TrimSpace(tg.Expr) == "" {
					t.Errorf("dashboard panel %q: target %d has no expr", p.Title, i)
				}
				out = append(out, expr{fmt.Sprintf("dashboard/%s/%d", p.Title, i), tg.Expr})
			}
		}
	}
	walk(d.Panels)
	// label_values(selector, label): the selector is an expression of its own.
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("variable %s: %v", v.Name, err)
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(selector, label)", v.Name, q.Query)
		}
		out = append(out, expr{"dashboard/variable " + v.Name, m[1]})
	}
	if len(out) < 40 {
		t.Fatalf("only %d expressions found in %s", len(out), dashboardFile)
	}
	return out
}

// alertExprs are the expressions of every rule of the rules file.
func alertExprs(t *testing.T) []expr {
	t.Helper()
	b, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", alertsFile, err)
	}
	var out []expr
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, expr{"alerts/" + r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

var variableRE = regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`)

// substitute replaces Grafana's variables: the intervals by durations, the template
// variables (used as regular expressions, in =~ matchers) by .* (their "All").
func substitute(q string) string {
	return variableRE.ReplaceAllStringFunc(q, func(v string) string {
		switch strings.Trim(v, "${}") {
		case "__rate_interval", "__interval":
			return "1m"
		case "__range":
			return "5m"
		}
		return ".*"
	})
}

// metricNames are the metric names of every selector of q.
func metricNames(q string) ([]string, error) {
	e, err := metricsql.Parse(q)
	if err != nil {
		return nil, err
	}
	var names []string
	metricsql.VisitAll(e, func(e metricsql.Expr) {
		me, ok := e.(*metricsql.MetricExpr)
		if !ok {
			return
		}
		for _, lfs := range me.LabelFilterss {
			for _, lf := range lfs {
				if lf.Label == "__name__" && !lf.IsRegexp && !lf.IsNegative && !slices.Contains(names, lf.Value) {
					names = append(names, lf.Value)
				}
			}
		}
	})
	sort.Strings(names)
	return names, nil
}

// gateway is a running web3gate binary.
type gateway struct {
	api, admin string
	token      string
	logs       *testproc.Buffer
}

// startWeb3gate builds web3gate with release-style linker values and starts it on the
// embedded dev chain, SQLite in a temporary directory and the test Redis.
func startWeb3gate(t *testing.T) *gateway {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "web3gate")
	pkg := "github.com/web3gate/web3gate/internal/buildinfo"
	build := exec.Command("go", "build", "-o", bin, "-ldflags",
		fmt.Sprintf("-X %s.version=%s -X %s.revision=%s", pkg, testVersion, pkg, testRevision), "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	redisURL, prefix := testengine.Redis(t)
	token := "monitoring-test-token"
	sum := sha256.Sum256([]byte(token))
	cfg := fmt.Sprintf(`
auth:
  clients:
    - id: monitoring
  tokens:
    - sha256: %s
      principal: ops
store:
  path: %s
wallet:
  keys:
    dir: %s
    lightScrypt: true
redis:
  url: %q
  keyPrefix: %q
devchain:
  enabled: true
owners:
  chains:
    - chainId: 1337
upstreams:
  mainnet: 1337
  chains:
    - chainId: 1337
      name: dev
      urls: [embedded]
`, hex.EncodeToString(sum[:]), filepath.Join(dir, "web3gate.db"), filepath.Join(dir, "keystore"), redisURL, prefix)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	api, admin := testproc.FreeAddr(t), testproc.FreeAddr(t)
	g := &gateway{api: "http://" + api, admin: admin, token: token, logs: &testproc.Buffer{}}
	cmd := exec.Command(bin, "--config", cfgPath, "--listen", api, "--admin-listen", admin)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = g.logs, g.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("web3gate did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("web3gate logs:\n%s", g.logs.String())
		}
	})
	wait.Within(t, 60*time.Second, "web3gate ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("web3gate exited at start:\n%s", g.logs.String())
		default:
		}
		resp, err := http.Get("http://" + admin + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return g
}

// traffic makes the series that exist only once something happened: calls answered and
// refused, cached and forwarded, REST requests.
func (g *gateway) traffic(t *testing.T) {
	t.Helper()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber"}`,
		`{"jsonrpc":"2.0","id":2,"method":"eth_getBlockByNumber","params":["0x0",false]}`,
		`{"jsonrpc":"2.0","id":3,"method":"eth_getBlockByNumber","params":["0x0",false]}`,
		`{"jsonrpc":"2.0","id":4,"method":"eth_chainId"}`,
		`{"jsonrpc":"2.0","id":5,"method":"no_suchMethod"}`,
	} {
		req, err := http.NewRequest(http.MethodPost, g.api+"/v1/web3/mainnet", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "monitoring")
		req.Header.Set("Authorization", "Bearer "+g.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := http.Get(g.api + "/v1/products")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

// prometheus is a running Prometheus server.
type prometheus struct{ base string }

// startPrometheus starts Prometheus on loopback with its own storage, scraping web3gate's
// admin listener every second and evaluating the alerting rules every second.
func startPrometheus(t *testing.T, bin, promtool, target string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	rules, err := filepath.Abs(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - %s
scrape_configs:
  - job_name: web3gate
    metrics_path: /metrics
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "config", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s", err, out)
	}
	addr := testproc.FreeAddr(t)
	logs := &testproc.Buffer{}
	cmd := exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("prometheus did not stop within 30s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("prometheus logs:\n%s", logs.String())
		}
	})
	p := &prometheus{base: "http://" + addr}
	wait.Within(t, 60*time.Second, "prometheus ready", func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited at start:\n%s", logs.String())
		default:
		}
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (p *prometheus) get(path string, params url.Values) (json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var r apiResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %w", path, resp.StatusCode, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

type sample struct {
	Metric map[string]string `json:"metric"`
}

// query runs q as an instant query: an error for a query Prometheus cannot parse or run.
func (p *prometheus) query(q string) ([]sample, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {q}})
	if err != nil {
		return nil, err
	}
	var d struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, err
	}
	if d.ResultType != "vector" {
		return nil, nil // a scalar
	}
	var s []sample
	return s, json.Unmarshal(d.Result, &s)
}

// exportedNames are the names of the series web3gate's scrape brings, from the metadata
// Prometheus read in it (the histograms' _bucket, _sum and _count), and Prometheus's own
// series the alerts may use.
func (p *prometheus) exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	data, err := p.get("/api/v1/metadata", nil)
	if err != nil {
		t.Fatal(err)
	}
	var md map[string][]struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(data, &md); err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for n, ms := range md {
		names[n] = true
		for _, m := range ms {
			if m.Type == "histogram" || m.Type == "summary" {
				names[n+"_sum"], names[n+"_count"] = true, true
			}
			if m.Type == "histogram" {
				names[n+"_bucket"] = true
			}
		}
	}
	if !names["web3gate_rpc_requests_total"] || !names["web3gate_build_info"] {
		t.Fatalf("the metadata of the scrape lacks web3gate's metrics: %d names", len(names))
	}
	for _, n := range prometheusOwn {
		names[n] = true
	}
	return names
}

type promRule struct {
	Name           string    `json:"name"`
	Health         string    `json:"health"`
	LastError      string    `json:"lastError"`
	LastEvaluation time.Time `json:"lastEvaluation"`
}

func (p *prometheus) rules(t *testing.T) []promRule {
	t.Helper()
	data, err := p.get("/api/v1/rules", nil)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatal(err)
	}
	var out []promRule
	for _, g := range d.Groups {
		out = append(out, g.Rules...)
	}
	return out
}
