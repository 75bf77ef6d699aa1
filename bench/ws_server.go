//go:build linux

// The servers under (w): starting them, web3gate's config, and what its metrics tell.

package main

import (
	"context"
	"crypto/ecdsa"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/crypto"
	"gopkg.in/yaml.v3"

	"github.com/web3gate/web3gate/devchain"
)

// wsServer is one server under (w): how to reach it and what it runs as.
type wsServer struct {
	key, name     string
	proc          *child
	httpURL       string
	wsURL         string
	admin         string // web3gate's admin listener; "" for anvil
	header        http.Header
	key0          *ecdsa.PrivateKey // the sending account
	sightFromFeed bool              // the start of a delivery is the feed's sight of the block
	others        []*child          // more processes of the server (the node behind web3gate)
	// announce is the node's ws:// URL whose newHeads announce the blocks: the start of a
	// delivery is the announcement's receive time on the bench's own socket there.
	announce string
}

// stop stops the server's processes.
func (srv *wsServer) stop(cs *children) {
	_ = cs.stop(srv.proc)
	for _, c := range srv.others {
		_ = cs.stop(c)
	}
}

// startWSServer starts the server of k with its sending account, on the servers' CPUs.
func startWSServer(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin, dir, k string, o wsOptions) (*wsServer, error) {
	if k == "wn" || k == "wp" {
		return startWSNodeServer(ctx, cs, cfg, env, anvilBin, dir, k, o, k == "wp")
	}
	if k == "w0" {
		t := &target{key: "w0", headers: [][2]string{{"Content-Type", "application/json"}}}
		if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, t); err != nil {
			return nil, err
		}
		key, err := crypto.HexToECDSA(anvilDevKey0)
		if err != nil {
			return nil, err
		}
		return &wsServer{key: k, name: "anvil", proc: t.servers[0], httpURL: t.url,
			wsURL: "ws" + strings.TrimPrefix(t.url, "http"), header: http.Header{}, key0: key}, nil
	}
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (ws)", wsConfig(env.root, dir, o.sockets()))
	if err != nil {
		return nil, err
	}
	accounts, err := devchain.DevAccounts(wsDevAccount + 1)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	for _, h := range devHeaders {
		header.Set(h[0], h[1])
	}
	header.Del("Content-Type")
	return &wsServer{key: k, name: "web3gate", proc: c, httpURL: api + "/v1/web3/mainnet",
		wsURL: "ws" + strings.TrimPrefix(api, "http") + "/v1/web3/mainnet", admin: admin, header: header,
		key0: accounts[wsDevAccount].Key, sightFromFeed: true}, nil
}

// wsConfig is the shipped config.yaml on a fresh store in dir, its connection limits raised
// for one client holding sockets WebSockets from one address.
func wsConfig(root, dir string, sockets int) func(api, admin int) (string, error) {
	return func(api, admin int) (string, error) {
		raw, err := os.ReadFile(filepath.Join(root, "config.yaml"))
		if err != nil {
			return "", err
		}
		out, err := wsConfigBytes(raw, api, admin, dir, sockets)
		if err != nil {
			return "", fmt.Errorf("config.yaml: %w", err)
		}
		path := filepath.Join(dir, "web3gate.yaml")
		return path, os.WriteFile(path, out, 0o600)
	}
}

func wsConfigBytes(raw []byte, api, admin int, dir string, sockets int) ([]byte, error) {
	out, err := signConfigBytes(raw, api, admin, dir, nil)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return nil, err
	}
	limit := strconv.Itoa(sockets + 100) // and the bench's HTTP connections
	for _, key := range []string{"server.maxConns", "server.maxConnsPerIP", "server.websocket.maxConnsPerClient",
		"server.websocket.maxConnsPerPrincipal", "server.websocket.maxConnsPerAddress"} {
		if err := setYAML(&doc, key, limit); err != nil {
			return nil, err
		}
	}
	return yaml.Marshal(&doc)
}

// goMetrics reads the Go runtime's series of web3gate's /metrics; nil for anvil.
func (srv *wsServer) goMetrics() (map[string]float64, error) {
	if srv.admin == "" {
		return nil, nil
	}
	return metricsWithPrefix(srv.admin, "go_")
}

// wsDropped says which subscribers web3gate dropped, from its metrics; "" none.
func wsDropped(admin string) (string, error) {
	m, err := metricsWithPrefix(admin, "web3gate_websocket_dropped_total")
	if err != nil {
		return "", err
	}
	var parts []string
	for k, v := range m {
		if v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", k, v))
		}
	}
	slices.Sort(parts)
	if len(parts) == 0 {
		return "", nil
	}
	return "web3gate dropped subscribers: " + strings.Join(parts, ", "), nil
}

// feedSighting is the head web3gate's feed has seen and when it first saw it.
type feedSighting struct {
	block uint64
	at    int64 // Unix ns
}

// feedSight reads web3gate's feed head and when the feed first saw it
// (web3gate_feed_head_block, web3gate_feed_head_seen_timestamp_seconds) of its one chain.
func feedSight(admin string) (feedSighting, error) {
	m, err := metricsWithPrefix(admin, "web3gate_feed_head_")
	if err != nil {
		return feedSighting{}, err
	}
	return parseFeedSight(m)
}

func parseFeedSight(m map[string]float64) (feedSighting, error) {
	var fs feedSighting
	var heads, seens int
	for k, v := range m {
		name, _, _ := strings.Cut(k, "{")
		switch name {
		case "web3gate_feed_head_block":
			heads++
			fs.block = uint64(v)
		case "web3gate_feed_head_seen_timestamp_seconds":
			seens++
			fs.at = int64(math.Round(v * 1e9))
		}
	}
	if heads != 1 || seens != 1 || fs.at <= 0 {
		return fs, fmt.Errorf("web3gate's /metrics: %d web3gate_feed_head_block and %d web3gate_feed_head_seen_timestamp_seconds series (%v), want one chain's", heads, seens, m)
	}
	return fs, nil
}

// sightTimes matches the feed's sightings, one read after each block was delivered, with the
// blocks mined: each must be of its block.
func sightTimes(sights []feedSighting, numbers []uint64) ([]int64, error) {
	if len(sights) != len(numbers) {
		return nil, fmt.Errorf("%d sightings of the feed for %d blocks", len(sights), len(numbers))
	}
	at := make([]int64, len(numbers))
	for i, fs := range sights {
		if fs.block != numbers[i] {
			return nil, fmt.Errorf("after block %d was delivered, web3gate's feed head was block %d", numbers[i], fs.block)
		}
		at[i] = fs.at
	}
	return at, nil
}
