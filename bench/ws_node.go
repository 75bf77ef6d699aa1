//go:build linux

// (w) fed by a node: web3gate in front of an anvil node, its feed polling the node ((wn)) or
// taking the heads the node pushes over its WebSocket ((wp), upstreams.chains[].wsUrls),
// with the same subscribers and blocks as (w). A delivery is timed from the node's
// announcement of the block: the kernel's receive time of the node's newHeads notification
// on one more socket, the bench's own, subscribed to the node directly (the "first push").

package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/crypto"
	"gopkg.in/yaml.v3"
)

// wsNodeChain is the chain (w)'s node-fed servers serve (anvil's), as named in web3gate.
const wsNodeChain = "anvil"

// startWSNodeServer starts an anvil node and web3gate in front of it, polling it (push
// false) or taking its pushed heads.
func startWSNodeServer(ctx context.Context, cs *children, cfg runConfig, env signEnv, anvilBin, dir, k string, o wsOptions, push bool) (*wsServer, error) {
	t := &target{key: k + "-anvil", headers: [][2]string{{"Content-Type", "application/json"}}}
	if err := startAnvil(ctx, cs, cfg.serverCPUs, anvilBin, t); err != nil {
		return nil, err
	}
	node := t.servers[0]
	nodeWS := "ws" + strings.TrimPrefix(t.url, "http")
	chain := map[string]any{"chainId": anvilChainID, "name": wsNodeChain, "urls": []string{t.url}}
	if push {
		chain["wsUrls"] = []string{nodeWS}
	}
	base := wsConfig(env.root, dir, o.sockets())
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, "web3gate (ws, "+k+")", func(apiPort, adminPort int) (string, error) {
		path, err := base(apiPort, adminPort)
		if err != nil {
			return "", err
		}
		return path, addYAMLChain(path, chain)
	})
	if err != nil {
		_ = cs.stop(node)
		return nil, err
	}
	key, err := crypto.HexToECDSA(anvilDevKey0)
	if err != nil {
		return nil, err
	}
	header := http.Header{}
	for _, h := range devHeaders {
		header.Set(h[0], h[1])
	}
	header.Del("Content-Type")
	return &wsServer{key: k, name: map[bool]string{false: "web3gate polling anvil", true: "web3gate pushed by anvil"}[push],
		proc: c, others: []*child{node}, httpURL: t.url,
		wsURL: "ws" + strings.TrimPrefix(api, "http") + "/v1/web3/chains/" + strconv.Itoa(anvilChainID),
		admin: admin, header: header, key0: key, announce: nodeWS}, nil
}

// addYAMLChain appends chain to upstreams.chains of the config file at path.
func addYAMLChain(path string, chain map[string]any) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return err
	}
	n := doc.Content[0]
	for _, key := range []string{"upstreams", "chains"} {
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return fmt.Errorf("%s: no upstreams.chains", path)
		}
		n = next
	}
	var add yaml.Node
	if err := add.Encode(chain); err != nil {
		return err
	}
	n.Content = append(n.Content, &add)
	out, err := yaml.Marshal(&doc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, out, 0o600)
}

// feedCalls is the sum of web3gate's web3gate_feed_upstream_calls_total.
func feedCalls(admin string) (float64, error) {
	m, err := metricsWithPrefix(admin, "web3gate_feed_upstream_calls_total")
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, v := range m {
		sum += v
	}
	return sum, nil
}

// announcements are the node's announcement times of blocks (Unix ns), from the announcer
// socket: the first receive time of each block's newHeads notification.
func announcements(ac *wsClient, numbers []uint64) ([]int64, error) {
	at := map[uint64]int64{}
	for _, d := range ac.subs[0].got {
		if _, ok := at[d.block]; !ok {
			at[d.block] = d.first
		}
	}
	out := make([]int64, len(numbers))
	for i, n := range numbers {
		if at[n] == 0 {
			return nil, fmt.Errorf("the node's newHeads did not announce block %d to the bench's socket", n)
		}
		out[i] = at[n]
	}
	return out, nil
}
