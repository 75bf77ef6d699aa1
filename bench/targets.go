//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// target is one server under load.
type target struct {
	key     string // a, b, c, d
	name    string
	url     string
	method  string // "" for POST
	body    string
	headers [][2]string
	script  string   // the wrk Lua script
	servers []*child // the processes whose CPU is the target's server side
	admin   string   // web3gate's admin base URL, for /metrics; "" for other servers
	// moreAdmins are the admin base URLs of the other web3gate replicas of the target
	// ((g2)): their counters add up with admin's (scrapeAll).
	moreAdmins []string
	// pgDSN is the round's PostgreSQL database ((f2), (g2)), whose backends' CPU the run
	// measures; "" for a target on SQLite.
	pgDSN string
}

// The requests of the load.
const (
	chainIDBody = `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`
	// balanceOf is anvil's first dev account, funded at genesis.
	balanceOf   = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
	balanceBody = `{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["` + balanceOf + `","latest"]}`
	// anvilChainID is the chain of the anvil node (anvil's default).
	anvilChainID = 31337
	// devChainID is the dev chain id of the shipped config.yaml.
	devChainID = 1337
)

// Bounds of the start of a server.
const (
	readyTimeout  = 30 * time.Second
	pollInterval  = 25 * time.Millisecond
	probeTimeout  = 2 * time.Second
	startAttempts = 3
)

// probeClient talks to the servers outside the load: readiness, checks, metrics.
var probeClient = &http.Client{
	Timeout:   probeTimeout,
	Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 10 * time.Second},
}

// goBuild builds pkg (relative to dir) into out.
func goBuild(ctx context.Context, dir, pkg, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -o %s %s (in %s): %w\n%s", out, pkg, dir, err, indent(string(b)))
	}
	return nil
}

// startServer starts a server with fresh free ports until it is ready, retrying on another
// port when the chosen one was taken meanwhile. args gets the ports chosen.
func startServer(ctx context.Context, cs *children, name, cpus, bin string, nports int,
	args func(ports []int) ([]string, error), ready func(ports []int) error) (*child, []int, error) {
	var errs []error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		ports := make([]int, nports)
		for i := range ports {
			p, err := freePort()
			if err != nil {
				return nil, nil, err
			}
			ports[i] = p
		}
		a, err := args(ports)
		if err != nil {
			return nil, nil, err
		}
		c, err := cs.start(name, cpus, bin, a...)
		if err != nil {
			return nil, nil, err
		}
		err = waitReady(ctx, c, func() error { return ready(ports) })
		if err == nil {
			return c, ports, nil
		}
		c.kill()
		if ctx.Err() != nil || !strings.Contains(strings.ToLower(c.out.String()), "address already in use") {
			return nil, nil, err
		}
		errs = append(errs, fmt.Errorf("attempt %d: %w", attempt, err))
	}
	return nil, nil, fmt.Errorf("%s: no free port after %d attempts: %w", name, startAttempts, errors.Join(errs...))
}

// waitReady polls probe until it succeeds, the child exits, ctx ends or readyTimeout passes.
func waitReady(ctx context.Context, c *child, probe func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		if c.exited() {
			return fmt.Errorf("%s exited before it was ready: %v\n%s", c.name, c.err, indent(c.out.String()))
		}
		err := probe()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %v (last probe: %v)\n%s", c.name, readyTimeout, err, indent(c.out.String()))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// post sends one request of t and returns the HTTP status and body.
func post(url, body string, headers [][2]string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, b, err
}

// rpcResult sends one request of t and returns its JSON-RPC result, checking everything else
// about the answer: HTTP 200, JSON-RPC 2.0, the id echoed, no error member.
func rpcResult(t *target) (json.RawMessage, error) {
	status, body, err := post(t.url, t.body, t.headers)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", status, bytes.TrimSpace(body))
	}
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("answer %q: %w", body, err)
	}
	if r.JSONRPC != "2.0" || string(r.ID) != "1" || len(r.Error) > 0 || len(r.Result) == 0 {
		return nil, fmt.Errorf("answer is not a JSON-RPC 2.0 result to id 1: %s", body)
	}
	return r.Result, nil
}

// startBare starts bench/bare for t: target (a) answering by itself, or with upstream the
// reference forwarder (e).
func startBare(ctx context.Context, cs *children, cpus, bin string, t *target, upstream string) error {
	c, _, err := startServer(ctx, cs, "bare "+t.key, cpus, bin, 1,
		func(p []int) ([]string, error) {
			t.url = fmt.Sprintf("http://127.0.0.1:%d/", p[0])
			args := []string{"-listen", fmt.Sprintf("127.0.0.1:%d", p[0])}
			if upstream != "" {
				args = append(args, "-upstream", upstream)
			}
			return args, nil
		},
		func([]int) error {
			_, err := rpcResult(t)
			return err
		})
	if err != nil {
		return err
	}
	t.servers = []*child{c}
	return nil
}

// startAnvil starts an anvil node for t: target (c).
func startAnvil(ctx context.Context, cs *children, cpus, bin string, t *target) error {
	want := `"0x` + strconv.FormatUint(anvilChainID, 16) + `"`
	c, _, err := startServer(ctx, cs, "anvil", cpus, bin, 1,
		func(p []int) ([]string, error) {
			t.url = fmt.Sprintf("http://127.0.0.1:%d", p[0])
			return []string{"--host", "127.0.0.1", "--port", strconv.Itoa(p[0]),
				"--chain-id", strconv.Itoa(anvilChainID), "--quiet"}, nil
		},
		func([]int) error {
			probe := *t
			probe.body = chainIDBody
			res, err := rpcResult(&probe)
			if err == nil && string(res) != want {
				err = fmt.Errorf("eth_chainId answered %s, want %s: another server has the port", res, want)
			}
			return err
		})
	if err != nil {
		return err
	}
	t.servers = []*child{c}
	return nil
}

// startWeb3gate starts the web3gate binary with the config file written by config(api,
// admin ports), once it passes `web3gate config check`, and waits until /readyz says every
// chain has a healthy upstream.
func startWeb3gate(ctx context.Context, cs *children, cpus, bin, name string, config func(api, admin int) (string, error)) (*child, string, string, error) {
	var api, admin string
	c, _, err := startServer(ctx, cs, name, cpus, bin, 2,
		func(p []int) ([]string, error) {
			path, err := config(p[0], p[1])
			if err != nil {
				return nil, err
			}
			if out, err := exec.Command(bin, "config", "check", "--config", path).CombinedOutput(); err != nil {
				return nil, fmt.Errorf("web3gate config check --config %s: %w\n%s", path, err, indent(string(out)))
			}
			api, admin = fmt.Sprintf("http://127.0.0.1:%d", p[0]), fmt.Sprintf("http://127.0.0.1:%d", p[1])
			return []string{"serve", "--config", path}, nil
		},
		func([]int) error {
			resp, err := probeClient.Get(admin + "/readyz")
			if err != nil {
				return err
			}
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("/readyz: HTTP %d %s", resp.StatusCode, bytes.TrimSpace(b))
			}
			return nil
		})
	return c, api, admin, err
}

// devConfig is the shipped config.yaml with the listeners on the given ports and the log
// level at warn: target (b) on the embedded dev chain, with the dev credentials.
func devConfig(root, dir string) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		out, err := devConfigBytes(raw, api, admin)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		path := filepath.Join(dir, "web3gate-dev.yaml")
		return path, os.WriteFile(path, out, 0o600)
	}
}

// devConfigBytes is the shipped config raw with the listeners on the given ports, the log
// level at warn and the rate limits off: each measurement loads one client far beyond the
// shipped budgets, and (l) alone measures what the limits cost.
func devConfigBytes(raw []byte, api, admin int) ([]byte, error) {
	return configBytes(raw, api, admin, false)
}

// configBytes is devConfigBytes, with the rate-limit stage on when limited: every budget
// raised beyond what a load spends (1e9 CU/s, burst 1e9), the REST limits off.
func configBytes(raw []byte, api, admin int, limited bool) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	sets := []struct{ path, value string }{
		{"server.listen", fmt.Sprintf("127.0.0.1:%d", api)},
		{"admin.listen", fmt.Sprintf("127.0.0.1:%d", admin)},
		{"log.level", "warn"},
		{"rateLimit.enabled", fmt.Sprint(limited)},
		{"rateLimit.rest.enabled", "false"},
	}
	if limited {
		for _, k := range []string{"client", "principal"} {
			sets = append(sets, struct{ path, value string }{"rateLimit." + k + ".rate", "1000000000"},
				struct{ path, value string }{"rateLimit." + k + ".burst", "1000000000"})
		}
	}
	if err := ensureMappings(&doc, "rateLimit", "rest"); err != nil {
		return nil, err
	}
	for _, set := range sets {
		if err := setOrAddYAML(&doc, set.path, set.value); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(&doc)
}

// ensureMappings adds the mapping keys[0], and keys[1] within it and so on, to a YAML
// document that lacks them.
func ensureMappings(doc *yaml.Node, keys ...string) error {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range keys {
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: not in a mapping", key)
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, next)
		}
		n = next
	}
	return nil
}

// setYAML sets the scalar at a dotted key path of a YAML document.
func setYAML(doc *yaml.Node, path, value string) error {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, key := range strings.Split(path, ".") {
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: %s is not a mapping", path, key)
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return fmt.Errorf("%s: no key %s", path, key)
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s: not a scalar", path)
	}
	n.Value = value
	return nil
}

// putYAML is setYAML that adds the keys of path the document lacks (a key backend's section,
// absent from the shipped config).
func putYAML(doc *yaml.Node, path, value string) error {
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	keys := strings.Split(path, ".")
	for i, key := range keys {
		if n.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: %s is not a mapping", path, key)
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == key {
				next = n.Content[j+1]
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode}
			if i == len(keys)-1 {
				next = &yaml.Node{Kind: yaml.ScalarNode}
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, next)
		}
		n = next
	}
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s: not a scalar", path)
	}
	n.Value = value
	return nil
}

// credentials are a client id and bearer token made for one run.
type credentials struct {
	clientID, token string
}

func newCredentials() (credentials, error) {
	var b [24]byte
	if _, err := rand.Read(b[:]); err != nil {
		return credentials{}, err
	}
	return credentials{clientID: "bench-" + hex.EncodeToString(b[:4]), token: hex.EncodeToString(b[4:])}, nil
}

func (c credentials) headers() [][2]string {
	return [][2]string{{"Content-Type", "application/json"}, {"X-API-Key", c.clientID}, {"Authorization", "Bearer " + c.token}}
}

// forwardConfig is target (d): mainnet is the anvil node, nothing cached or coalesced, so
// that every call goes upstream (upstream batching keeps its defaults: it sends every call,
// several to an exchange under load); the credentials are the run's own, since the dev ones
// are refused once mainnet is a real upstream.
func forwardConfig(dir, anvilURL string, cred credentials) func(api, admin int) (string, error) {
	return anvilGatewayConfig(dir, "web3gate-anvil.yaml", "web3gate forwarding to one anvil node", anvilURL, cred,
		"  enabled: false\n  coalesce: false\n", "")
}

// anvilGatewayConfig writes dir/file: a web3gate whose mainnet is the anvil node at anvilURL,
// with the run's credentials (its JWT signing key in dir), the given cache section body and
// any further sections (extra).
func anvilGatewayConfig(dir, file, what, anvilURL string, cred credentials, cache, extra string) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		sum := sha256.Sum256([]byte(cred.token))
		cfg := fmt.Sprintf(`# generated by go run ./bench: %s
server:
  listen: 127.0.0.1:%d
admin:
  listen: 127.0.0.1:%d
log:
  level: warn
auth:
  clients:
    - id: %s
  tokens:
    - sha256: %s
      principal: bench
  oauth:
    signingKeyFile: %s
cache:
%supstreams:
  mainnet: %d
  chains:
    - chainId: %d
      name: anvil
      urls: [%s]
devchain:
  enabled: false
rateLimit: {enabled: false, rest: {enabled: false}}
%s`, what, api, admin, cred.clientID, hex.EncodeToString(sum[:]), filepath.Join(dir, "jwt-signing-key.pem"), cache,
			anvilChainID, anvilChainID, anvilURL, extra)
		path := filepath.Join(dir, file)
		return path, os.WriteFile(path, []byte(cfg), 0o600)
	}
}

// devHeaders are the quickstart credentials of the shipped config.yaml (target b).
var devHeaders = [][2]string{{"Content-Type", "application/json"}, {"X-API-Key", "web3gate-dev"}, {"Authorization", "Bearer dev-access-token"}}

// counters are web3gate's request counters: calls by JSON-RPC outcome code, REST requests by
// status, and upstream exchanges by outcome.
type counters struct {
	calls    map[string]float64 // web3gate_rpc_requests_total by code
	rest     map[string]float64 // web3gate_rest_requests_total by HTTP status
	upstream map[string]float64 // web3gate_upstream_requests_total by outcome
	// methods is web3gate_rpc_requests_total by method and code, keyed "method code".
	methods map[string]float64
	// upstreamMethods is web3gate_upstream_requests_total by method, every outcome.
	upstreamMethods map[string]float64
	// redisLookups is web3gate_cache_redis_lookups_total by result, every method.
	redisLookups map[string]float64
}

// scrape reads the counters from web3gate's /metrics.
func scrape(admin string) (counters, error) {
	c := newCounters()
	series, err := metricsWithPrefix(admin, "web3gate_")
	if err != nil {
		return c, fmt.Errorf("scrape %s/metrics: %w", admin, err)
	}
	for name, v := range series {
		var dst map[string]float64
		var label string
		switch {
		case strings.HasPrefix(name, "web3gate_rpc_requests_total{"):
			dst, label = c.calls, "code"
		case strings.HasPrefix(name, "web3gate_upstream_requests_total{"):
			dst, label = c.upstream, "outcome"
		case strings.HasPrefix(name, "web3gate_rest_requests_total{"):
			dst, label = c.rest, "status"
		case strings.HasPrefix(name, "web3gate_cache_redis_lookups_total{"):
			dst, label = c.redisLookups, "result"
		default:
			continue
		}
		dst[labelValue(name, label)] += v
		if label == "code" {
			c.methods[labelValue(name, "method")+" "+labelValue(name, "code")] += v
		}
		if label == "outcome" {
			c.upstreamMethods[labelValue(name, "method")] += v
		}
	}
	return c, nil
}

// metricsWithPrefix reads the series of admin's /metrics whose names start with prefix:
// "name{labels}" → value.
func metricsWithPrefix(admin, prefix string) (map[string]float64, error) {
	resp, err := probeClient.Get(admin + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: HTTP %d", admin, resp.StatusCode)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}

// labelValue returns the value of label in a series name{...}.
func labelValue(series, label string) string {
	_, rest, ok := strings.Cut(series, label+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

func newCounters() counters {
	return counters{calls: map[string]float64{}, rest: map[string]float64{}, upstream: map[string]float64{}, methods: map[string]float64{},
		upstreamMethods: map[string]float64{}, redisLookups: map[string]float64{}}
}

// sub returns c − before, keeping the keys that changed.
func (c counters) sub(before counters) counters {
	d := newCounters()
	for _, m := range []struct{ d, c, b map[string]float64 }{
		{d.upstreamMethods, c.upstreamMethods, before.upstreamMethods}, {d.redisLookups, c.redisLookups, before.redisLookups},
	} {
		for k, v := range m.c {
			if n := v - m.b[k]; n != 0 {
				m.d[k] = n
			}
		}
	}
	for k, v := range c.methods {
		if n := v - before.methods[k]; n != 0 {
			d.methods[k] = n
		}
	}
	for k, v := range c.calls {
		if n := v - before.calls[k]; n != 0 {
			d.calls[k] = n
		}
	}
	for k, v := range c.upstream {
		if n := v - before.upstream[k]; n != 0 {
			d.upstream[k] = n
		}
	}
	for k, v := range c.rest {
		if n := v - before.rest[k]; n != 0 {
			d.rest[k] = n
		}
	}
	return d
}

// failures spells out the calls not answered ok and the upstream exchanges not ok.
func (c counters) failures() string {
	var parts []string
	for k, v := range c.calls {
		if k != "ok" {
			parts = append(parts, fmt.Sprintf("%.0f calls answered with JSON-RPC code %s", v, k))
		}
	}
	for k, v := range c.rest {
		if k != "200" {
			parts = append(parts, fmt.Sprintf("%.0f REST requests answered HTTP %s", v, k))
		}
	}
	for k, v := range c.upstream {
		if k != "ok" {
			parts = append(parts, fmt.Sprintf("%.0f upstream exchanges %s", v, k))
		}
	}
	return strings.Join(parts, ", ")
}
