package products

import (
	"fmt"
	"slices"
	"strings"

	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/store"
	"github.com/web3gate/web3gate/upstreams"
)

// IndexScope is what the owners indexer (owners/) indexes: the chains it follows and, for
// each, the NFT contracts it follows (nil or empty: every contract of the chain). The
// products of an indexed contract count totalSold from its tokens minted on chain.
type IndexScope struct {
	Chains map[uint64][]string
}

// NetworkChains maps product network names to chain ids as the upstreams config names them:
// "mainnet" is upstreams.mainnet, and each chain of upstreams.chains is its name, lowercased.
// "mainnet" keeps the alias's chain when a chain is also named so.
func NetworkChains(cfg upstreams.Config) map[string]uint64 {
	m := make(map[string]uint64, len(cfg.Chains)+1)
	for _, ch := range cfg.Chains {
		if ch.Name != "" {
			m[strings.ToLower(ch.Name)] = ch.ChainID
		}
	}
	if cfg.Mainnet != 0 {
		m["mainnet"] = cfg.Mainnet
	}
	return m
}

// indexedNetworks are the product networks whose chain is in scope, with the contracts
// followed there, sorted by network name (the SQL of the rule is then the same on every
// start).
func indexedNetworks(networks map[string]uint64, scope IndexScope) ([]store.IndexedNetwork, error) {
	var out []store.IndexedNetwork
	for name, chainID := range networks {
		contracts, ok := scope.Chains[chainID]
		if !ok {
			continue
		}
		n := store.IndexedNetwork{Network: name, ChainID: chainID}
		for i, c := range contracts {
			a, err := metadata.ParseAddress(c)
			if err != nil {
				return nil, fmt.Errorf("products: index scope of chain %d, contract %d: %w", chainID, i, err)
			}
			n.Contracts = append(n.Contracts, strings.ToLower(a.Hex()))
		}
		slices.Sort(n.Contracts)
		n.Contracts = slices.Compact(n.Contracts)
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b store.IndexedNetwork) int { return strings.Compare(a.Network, b.Network) })
	return out, nil
}
