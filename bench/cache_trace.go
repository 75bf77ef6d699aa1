//go:build linux

// (t)'s trace: the distinct calls drawn with a fixed seed, and the requests a Zipf law picks.

package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// cacheKey is one distinct call of the trace in its two spellings.
type cacheKey struct{ method, a, b string }

func hexU(n uint64) string { return "0x" + strconv.FormatUint(n, 16) }

// cacheKeySet draws the trace's distinct calls (see the top of cache.go).
func cacheKeySet(rng *rand.Rand, hashes []string) []cacheKey {
	addrs := make([]common.Address, 0, 50)
	for i := range 10 { // anvil's dev accounts are funded and have nonces; any 10 do for the rest
		addrs = append(addrs, devAccount(i))
	}
	for len(addrs) < 50 {
		var a common.Address
		for i := range a {
			a[i] = byte(rng.IntN(256))
		}
		addrs = append(addrs, a)
	}
	addr := func() (string, string) {
		a := addrs[rng.IntN(len(addrs))]
		return strings.ToLower(a.Hex()), a.Hex()
	}
	block := func() (string, string) {
		n := uint64(1 + rng.IntN(cacheFinalMax))
		return hexU(n), fmt.Sprintf("0x%04x", n)
	}
	type gen func() cacheKey
	account := func(method string) gen {
		return func() cacheKey {
			la, ca := addr()
			lb, pb := block()
			return cacheKey{method, `["` + la + `","` + lb + `"]`, `["` + ca + `",{"blockNumber":"` + pb + `"}]`}
		}
	}
	latest := func(method string) gen {
		return func() cacheKey {
			la, ca := addr()
			return cacheKey{method, `["` + la + `","latest"]`, `["` + ca + `","latest"]`}
		}
	}
	call := func(at func() (string, string)) gen {
		return func() cacheKey {
			la, ca := addr()
			sel := fmt.Sprintf("0x70a08231%064x", rng.IntN(1<<30)) // balanceOf(some holder)
			ba, bb := at()
			return cacheKey{"eth_call", `[{"to":"` + la + `","data":"` + sel + `"},"` + ba + `"]`,
				`[{"input":"0x` + strings.ToUpper(sel[2:]) + `","to":"` + ca + `"},"` + bb + `"]`}
		}
	}
	final := []struct {
		weight int
		g      gen
	}{
		{25, call(block)},
		{20, account("eth_getBalance")},
		{12, func() cacheKey {
			a, b := block()
			return cacheKey{"eth_getBlockByNumber", `["` + a + `",false]`, `["` + b + `",false]`}
		}},
		{12, func() cacheKey {
			from := uint64(1 + rng.IntN(cacheFinalMax-16))
			to := from + uint64(rng.IntN(16))
			la, ca := addr()
			return cacheKey{"eth_getLogs", `[{"fromBlock":"` + hexU(from) + `","toBlock":"` + hexU(to) + `","address":"` + la + `"}]`,
				`[{"address":["` + ca + `"],"toBlock":"` + hexU(to) + `","fromBlock":"` + hexU(from) + `"}]`}
		}},
		{10, account("eth_getTransactionCount")},
		{6, account("eth_getCode")},
		{5, func() cacheKey {
			la, ca := addr()
			slot := rng.IntN(8)
			a, b := block()
			return cacheKey{"eth_getStorageAt", `["` + la + `","` + hexU(uint64(slot)) + `","` + a + `"]`,
				`["` + ca + `","` + fmt.Sprintf("0x%064x", slot) + `","` + b + `"]`}
		}},
		{5, func() cacheKey {
			a, b := block()
			return cacheKey{"eth_getBlockReceipts", `["` + a + `"]`, `["` + b + `"]`}
		}},
		{5, func() cacheKey {
			h := hashes[rng.IntN(len(hashes))]
			return cacheKey{"eth_getBlockByHash", `["` + h + `",false]`, `["0x` + strings.ToUpper(h[2:]) + `",false]`}
		}},
	}
	head := []gen{
		call(func() (string, string) { return "latest", "latest" }),
		latest("eth_getBalance"), latest("eth_getTransactionCount"), latest("eth_getCode"),
		func() cacheKey {
			// Spelled with spaces: the counting proxy takes `["latest",false]` for a poll.
			return cacheKey{"eth_getBlockByNumber", `["latest", false]`, `[ "latest" , false ]`}
		},
	}
	seen := map[string]bool{}
	var keys []cacheKey
	for len(keys) < cacheKeys {
		var k cacheKey
		if rng.IntN(100) < 80 {
			w := rng.IntN(100)
			for _, f := range final {
				if w < f.weight {
					k = f.g()
					break
				}
				w -= f.weight
			}
		} else {
			k = head[rng.IntN(len(head))]()
		}
		if id := k.method + k.a; !seen[id] {
			seen[id] = true
			keys = append(keys, k)
		}
	}
	return keys
}

// devAccount is the 20 bytes of anvil's i-th dev account (its default mnemonic).
func devAccount(i int) common.Address {
	accounts := [...]string{
		"f39fd6e51aad88f6f4ce6ab8827279cfffb92266", "70997970c51812dc3a010c7d01b50e0d17dc79c8",
		"3c44cdddb6a900fa2b585dd299e03d12fa4293bc", "90f79bf6eb2c4f870365e785982e1f101e93b906",
		"15d34aaf54267db7d7c367839aaf71a00a2c6a65", "9965507d1a55bcc2695c58ba16fb37d819b0a4dc",
		"976ea74026e726554db657fa54763abd0c3a0aa9", "14dc79964da2c08b23698b3d3cc7ca32193d9955",
		"23618e81e3f5cdf7f54c3d65f7fbc0abf5b21e8f", "a0ee7a142d267c1f36714e4a8f75612f20a79720",
	}
	return common.HexToAddress(accounts[i])
}

// cacheTrace draws the requests: keys by a Zipf law over a random ranking, each in either
// spelling.
func cacheTrace(rng *rand.Rand, keys []cacheKey) []traceCall {
	rank := rng.Perm(len(keys))
	z := rand.NewZipf(rng, 1.1, 1, uint64(len(keys)-1))
	out := make([]traceCall, cacheTraceCalls)
	for i := range out {
		k := keys[rank[z.Uint64()]]
		params := k.a
		if rng.IntN(2) == 1 {
			params = k.b
		}
		out[i] = traceCall{body: `{"jsonrpc":"2.0","id":1,"method":"` + k.method + `","params":` + params + `}`,
			forward: forwardKey(k.method, []byte(params))}
	}
	return out
}

// traceCall is one request of the trace and its forwardKey.
type traceCall struct{ body, forward string }
