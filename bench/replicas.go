//go:build linux

package main

// The signing measurements on PostgreSQL (f2, g2): web3gate's store in a database of the
// bench's own, created fresh (CREATE DATABASE) on the PostgreSQL server of -postgres for each
// round and dropped after it.
//
//	(f2) eth_signTransaction as (f), one web3gate on PostgreSQL.
//	(g2) eth_sendTransaction as (g), from one dev account through two replicas on one
//	     database: wrk's two threads load one replica each. The first replica runs the
//	     embedded dev chain (the chain of (g)); the second has it as its upstream node, through
//	     the first one's /v1/web3/chains/1337 with a client id (reads and raw transactions need
//	     no token there). The account's key is in the store (wallet.keys.backend: store,
//	     imported with `web3gate accounts import` before the replicas start), so that both
//	     sign for it; both reserve its nonces, serialized by the account's advisory lock.
//
// Their nonce checks are (f)'s and (g)'s, over the calls both replicas answered ok.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"
	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/devchain"
)

// benchMaxConns is each replica's store pool on PostgreSQL.
const benchMaxConns = 16

// benchPassphraseEnv holds the keystore passphrase of the PostgreSQL runs, set for them only.
const benchPassphraseEnv = "WEB3GATE_KEYSTORE_PASSPHRASE"

// createDatabase creates a new database on the server of admin (a connection string of an
// existing database, e.g. postgres) and returns its connection string.
func createDatabase(ctx context.Context, admin string) (string, error) {
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	name := "w3g_bench_" + hex.EncodeToString(b[:])
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, admin)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL at -postgres: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(cctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		return "", fmt.Errorf("-postgres must be a postgres:// URL: %w", err)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// dropDatabase drops the database of dsn, made by createDatabase, ending its sessions.
func dropDatabase(admin, dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return err
	}
	name := strings.TrimPrefix(u.Path, "/")
	if !strings.HasPrefix(name, "w3g_bench_") {
		return fmt.Errorf("not a bench database: %s", name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	return err
}

// pgReplica is what makes one replica's configuration.
type pgReplica struct {
	index int    // 0: the replica with the embedded dev chain
	dsn   string // the store
	cred  *credentials
	// chainURL is the first replica's chain endpoint, the upstream node of the others.
	chainURL string
}

// pgSignConfig is signConfig on PostgreSQL for replica r: the store in r.dsn, the keys in
// the store, a replica id of its own and, with credentials (two replicas), those accepted
// instead of the dev ones, which web3gate takes only in front of its own dev chain.
func pgSignConfig(root, dir string, settings [][2]string, r pgReplica) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		text := string(raw)
		if r.cred != nil {
			sum := sha256.Sum256([]byte(r.cred.token))
			for _, rep := range [][2]string{
				{"    - id: web3gate-dev\n", "    - id: " + r.cred.clientID + "\n"},
				{"sha256: b1e46dbebcf3fa8cd6338efbcd8a0e6d8a4efe3e802280151c1bad9eea00a361", "sha256: " + hex.EncodeToString(sum[:])},
			} {
				if !strings.Contains(text, rep[0]) {
					return "", fmt.Errorf("config.yaml: no %q to replace", rep[0])
				}
				text = strings.Replace(text, rep[0], rep[1], 1)
			}
		}
		if r.index > 0 {
			if !strings.Contains(text, "urls: [embedded]") {
				return "", fmt.Errorf("config.yaml: no %q to replace", "urls: [embedded]")
			}
			text = strings.Replace(text, "urls: [embedded]", "urls: ["+r.chainURL+"]", 1)
		}
		out, err := signConfigBytes([]byte(text), api, admin, dir, settings)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		var doc yaml.Node
		if err := yaml.Unmarshal(out, &doc); err != nil {
			return "", err
		}
		sets := [][2]string{
			{"store.driver", "postgres"},
			{"store.dsn", r.dsn},
			{"store.maxConns", fmt.Sprint(benchMaxConns)},
			{"wallet.keys.backend", "store"},
			{"wallet.keys.lightScrypt", "true"},
			{"cluster.replicaId", fmt.Sprintf("bench-%d", r.index)},
		}
		if r.index == 0 && r.cred != nil {
			sets = append(sets, [2]string{"auth.allowReadsWithClientId", "true"})
		}
		if r.index > 0 {
			sets = append(sets, [2]string{"devchain.enabled", "false"})
		}
		for _, s := range sets {
			if err := setOrAddYAML(&doc, s[0], s[1]); err != nil {
				return "", err
			}
		}
		b, err := yaml.Marshal(&doc)
		if err != nil {
			return "", err
		}
		path := filepath.Join(dir, fmt.Sprintf("web3gate-%d.yaml", r.index))
		return path, os.WriteFile(path, b, 0o600)
	}
}

// setOrAddYAML is setYAML, adding the last key to its mapping when it is missing.
func setOrAddYAML(doc *yaml.Node, path, value string) error {
	if err := setYAML(doc, path, value); err == nil || !strings.Contains(err.Error(), "no key") {
		return err
	}
	i := strings.LastIndexByte(path, '.')
	if i < 0 {
		return fmt.Errorf("%s: not a key path", path)
	}
	parent, key := path[:i], path[i+1:]
	n := doc
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, k := range strings.Split(parent, ".") {
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil || next.Kind != yaml.MappingNode {
			return fmt.Errorf("%s: no mapping %s", path, k)
		}
		n = next
	}
	n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, &yaml.Node{Kind: yaml.ScalarNode, Value: value})
	return nil
}

// importDevKey imports the key of the dev account addr into the store of the config at
// cfgPath, owned by the dev principal, with `web3gate accounts import`.
func importDevKey(bin, cfgPath string, addr common.Address) error {
	accounts, err := devchain.DevAccounts(10)
	if err != nil {
		return err
	}
	for _, a := range accounts {
		if a.Address != addr {
			continue
		}
		cmd := exec.Command(bin, "accounts", "import", "--owner", "dev", "--private-key-stdin", "--config", cfgPath)
		cmd.Stdin = strings.NewReader(hex.EncodeToString(crypto.FromECDSA(a.Key)) + "\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("web3gate accounts import: %w\n%s", err, indent(string(out)))
		}
		return nil
	}
	return fmt.Errorf("%s is not one of the first 10 dev accounts", addr.Hex())
}

// splitScript is writeScript's script for t with each wrk thread connected to one of addrs
// (host:port) in turn: with as many threads as addresses, each server gets one thread's
// connections.
func splitScript(dir string, t *target, addrs []string) (string, error) {
	path, err := writeScript(dir, t)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("local addrs = {\n")
	for _, a := range addrs {
		host, port, _ := strings.Cut(a, ":")
		fmt.Fprintf(&b, "  {%s, %s},\n", luaString(host), luaString(port))
	}
	b.WriteString(`}
local threads = 0
setup = function(thread)
  local a = addrs[threads % #addrs + 1]
  threads = threads + 1
  thread.addr = wrk.lookup(a[1], a[2])[1]
end
`)
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// startSigners starts the web3gate processes of round r of sp, with their state in dir, and
// points t at them: one on a SQLite file (signConfig), or sp.replicas on a fresh PostgreSQL
// database. cleanup, once the processes stopped, drops that database.
func startSigners(ctx context.Context, cs *children, cfg runConfig, env signEnv, sp *signSpec, r int, dir string, t *target) (servers []*child, cleanup func() error, err error) {
	name := func(i int) string {
		if sp.replicas > 1 {
			return fmt.Sprintf("web3gate (%s) round %d replica %d", sp.t.key, r+1, i)
		}
		return fmt.Sprintf("web3gate (%s) round %d", sp.t.key, r+1)
	}
	cleanup = func() error { return nil }
	if sp.backend != "" {
		return startHardwareSigner(ctx, cs, cfg, env, sp, name(0), dir, t)
	}
	if !sp.postgres {
		c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, name(0), signConfig(env.root, dir, sp.settings))
		if err != nil {
			return nil, cleanup, err
		}
		t.url, t.admin, t.servers = api+"/v1/web3/mainnet", admin, []*child{c}
		return []*child{c}, cleanup, nil
	}
	dsn, err := createDatabase(ctx, env.postgres)
	if err != nil {
		return nil, cleanup, err
	}
	prev, had := os.LookupEnv(benchPassphraseEnv)
	var pass [16]byte
	if _, err := rand.Read(pass[:]); err != nil {
		return nil, cleanup, err
	}
	os.Setenv(benchPassphraseEnv, hex.EncodeToString(pass[:]))
	cleanup = func() error {
		if had {
			os.Setenv(benchPassphraseEnv, prev)
		} else {
			os.Unsetenv(benchPassphraseEnv)
		}
		return dropDatabase(env.postgres, dsn)
	}
	first := pgReplica{index: 0, dsn: dsn}
	if sp.replicas > 1 {
		cred, err := newCredentials()
		if err != nil {
			return nil, cleanup, err
		}
		first.cred = &cred
		t.headers = cred.headers()
		if t.script, err = writeScript(dir, t); err != nil {
			return nil, cleanup, err
		}
		// The other replicas sign with the account's key from the store.
		path, err := pgSignConfig(env.root, dir, sp.settings, first)(0, 0)
		if err != nil {
			return nil, cleanup, err
		}
		if err := importDevKey(env.bin, path, common.HexToAddress(sp.account)); err != nil {
			return nil, cleanup, err
		}
	}
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, name(0), pgSignConfig(env.root, dir, sp.settings, first))
	if err != nil {
		return nil, cleanup, err
	}
	servers = []*child{c}
	t.url, t.admin, t.servers = api+"/v1/web3/mainnet", admin, []*child{c}
	t.pgDSN = dsn
	addrs := []string{strings.TrimPrefix(api, "http://")}
	for i := 1; i < sp.replicas; i++ {
		rep := pgReplica{index: i, dsn: dsn, cred: first.cred, chainURL: fmt.Sprintf("%s/v1/web3/chains/%d/%s", api, devChainID, first.cred.clientID)}
		c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, name(i), pgSignConfig(env.root, dir, sp.settings, rep))
		if err != nil {
			return servers, cleanup, err
		}
		servers = append(servers, c)
		t.servers = append(t.servers, c)
		t.moreAdmins = append(t.moreAdmins, admin)
		addrs = append(addrs, strings.TrimPrefix(api, "http://"))
	}
	if sp.replicas > 1 {
		if t.script, err = splitScript(dir, t, addrs); err != nil {
			return servers, cleanup, err
		}
	}
	return servers, cleanup, nil
}

// scrapeAll is scrape summed over every web3gate process of t.
func scrapeAll(t *target) (counters, error) {
	c, err := scrape(t.admin)
	if err != nil {
		return c, err
	}
	for _, a := range t.moreAdmins {
		m, err := scrape(a)
		if err != nil {
			return c, err
		}
		for _, pair := range []struct{ dst, src map[string]float64 }{{c.calls, m.calls}, {c.rest, m.rest}, {c.upstream, m.upstream}, {c.methods, m.methods}} {
			for k, v := range pair.src {
				pair.dst[k] += v
			}
		}
	}
	return c, nil
}

// pgBackendsCPU reads the CPU time of each PostgreSQL backend connected to the database of
// dsn (by pid; the query's own connection left out). The server must run on this machine:
// the times come from /proc. A backend that ended since pg_stat_activity listed it is left
// out.
func pgBackendsCPU(ctx context.Context, dsn string) (map[int]time.Duration, error) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(cctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return nil, err
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, err
	}
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if d, err := cpuTime(int(pid)); err == nil {
			out[int(pid)] = d
		}
	}
	return out, nil
}

// pgCPUBetween is the CPU the backends of after used since before: all of it for a backend
// that started in between.
func pgCPUBetween(before, after map[int]time.Duration) time.Duration {
	var sum time.Duration
	for pid, d := range after {
		sum += d - before[pid]
	}
	return sum
}
