//go:build linux

// (o)'s queries: the GET /v1/owners cases over the generated index, and the check of an answer.

package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"

	"github.com/ethereum/go-ethereum/common"
)

// ownersCases are the kinds of GET /v1/owners of (o), each over several URLs; a case's want
// is the balances each URL must answer (0: at least one). The deep page
// keys are found by walking the first contract in pages of 1,000.
func ownersCases(api string, em []common.Address) ([]getCase, error) {
	rng := rand.New(rand.NewPCG(5, 1_000_000))
	base := fmt.Sprintf("/v1/owners?chainId=%d&", anvilChainID)
	lower := func(a common.Address) string { return strings.ToLower(a.Hex()) }
	var one721, one1155, firstPages, deep []string
	for range 50 {
		one721 = append(one721, fmt.Sprintf("%scontractAddress=%s&tokenId=%d", base, lower(em[rng.IntN(3)]), rng.IntN(ownersMints721)))
		one1155 = append(one1155, fmt.Sprintf("%scontractAddress=%s&tokenId=%d", base, lower(em[3]), rng.IntN(ownersMints1155+ownersBatchLogs*ownersBatchSize)))
	}
	for _, e := range em {
		firstPages = append(firstPages, base+"contractAddress="+lower(e))
	}
	// Walk em[0] and keep the page keys at a tenth, a quarter, half, three quarters, nine tenths.
	marks := map[int]bool{24: true, 60: true, 120: true, 180: true, 216: true}
	pageKey := ""
	for page := 1; page <= 216; page++ {
		u := api + base + "limit=1000&contractAddress=" + lower(em[0])
		if pageKey != "" {
			u += "&pageKey=" + url.QueryEscape(pageKey)
		}
		resp, err := probeClient.Get(u)
		if err != nil {
			return nil, err
		}
		var a struct {
			PageKey *string `json:"pageKey"`
		}
		err = json.NewDecoder(resp.Body).Decode(&a)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || a.PageKey == nil {
			return nil, fmt.Errorf("walking %s: page %d: HTTP %d, %v", lower(em[0]), page, resp.StatusCode, err)
		}
		pageKey = *a.PageKey
		if marks[page] {
			deep = append(deep, base+"contractAddress="+lower(em[0])+"&pageKey="+url.QueryEscape(pageKey))
		}
	}
	all := make([]string, len(em))
	for i, e := range em {
		all[i] = lower(e)
	}
	return []getCase{
		{key: "o1", name: "one ERC721 token", paths: one721, want: 1},
		{key: "o2", name: "one ERC1155 token", paths: one1155, want: 0},
		{key: "o3", name: "a contract, first page", paths: firstPages, want: 100},
		{key: "o4", name: "a contract, deep pageKey", paths: deep, want: 100},
		{key: "o5", name: "four contracts, a page", paths: []string{base + "contractAddresses=" + strings.Join(all, ","),
			base + "contractAddresses[]=" + all[1] + "&contractAddresses[]=" + all[3]}, want: 100},
		// A page ten times the default: shown, not a target.
		{key: "o6", name: "a page of 1,000", paths: []string{base + "limit=1000&contractAddress=" + all[1], base + "limit=1000&contractAddress=" + all[3]}, want: 1000, aside: true},
	}, nil
}

// checkOwners GETs url and checks the answer: 200, X-Indexed-Block, want balances (0: at
// least one).
func checkOwners(url string, want int) error {
	resp, body, err := probeGet(url, 4<<20)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Indexed-Block") == "" {
		return fmt.Errorf("GET %s: HTTP %d (X-Indexed-Block %q) %.300s", url, resp.StatusCode, resp.Header.Get("X-Indexed-Block"), body)
	}
	var v struct {
		Balances []json.RawMessage `json:"balances"`
		Error    json.RawMessage   `json:"error"`
	}
	if err := json.Unmarshal(body, &v); err != nil || string(v.Error) != "null" {
		return fmt.Errorf("GET %s: not an owners answer: %.300s", url, body)
	}
	if (want == 0 && len(v.Balances) == 0) || (want > 0 && len(v.Balances) != want) {
		return fmt.Errorf("GET %s: %d balances, want %d", url, len(v.Balances), want)
	}
	return nil
}
