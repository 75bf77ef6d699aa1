//go:build linux

// What web3gate says of a (k) run: its records of the sends, and its count of bumps.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// bumpRecords is what web3gate's records of a run's requests say.
type bumpRecords struct {
	versions int            // versions listed
	states   map[string]int // records by state
	errors   []string       // the first few distinct errors of failed records
}

// bumpsCounted is web3gate_tx_bumps_total over every label set.
func bumpsCounted(admin string) (float64, error) {
	m, err := metricsWithPrefix(admin, "web3gate_tx_bumps_total")
	var n float64
	for _, v := range m {
		n += v
	}
	return n, err
}

// checkBumpRecords reads web3gate's record of every hash and returns what they say. With all, it waits until every record
// is mined (or confirmed) with its minedHash, and reports those that never got there.
func checkBumpRecords(ctx context.Context, client *http.Client, api string, cred credentials, hashes []string, all bool) (bumpRecords, []string, error) {
	deadline := time.Now().Add(bumpRecordWait)
	for {
		rs := bumpRecords{states: map[string]int{}}
		var open []string
		for _, h := range hashes {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, api+"/v1/transactions/"+h, nil)
			if err != nil {
				return rs, nil, err
			}
			for _, hd := range cred.headers() {
				req.Header.Set(hd[0], hd[1])
			}
			resp, err := client.Do(req)
			if err != nil {
				return rs, nil, err
			}
			raw, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if err != nil {
				return rs, nil, err
			}
			var body struct {
				Transaction struct {
					State     string            `json:"state"`
					Error     *string           `json:"error"`
					MinedHash string            `json:"minedHash"`
					Versions  []json.RawMessage `json:"versions"`
				} `json:"transaction"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &body) != nil {
				return rs, nil, fmt.Errorf("GET /v1/transactions/%s: HTTP %d %s", h, resp.StatusCode, raw)
			}
			tx := body.Transaction
			rs.versions += len(tx.Versions)
			rs.states[tx.State]++
			if tx.Error != nil && *tx.Error != "" && !slices.Contains(rs.errors, *tx.Error) && len(rs.errors) < 3 {
				rs.errors = append(rs.errors, *tx.Error)
			}
			if (tx.State != "mined" && tx.State != "confirmed") || tx.MinedHash == "" {
				open = append(open, fmt.Sprintf("%s: state %s, minedHash %q", h, tx.State, tx.MinedHash))
			}
		}
		if !all || len(open) == 0 {
			return rs, nil, nil
		}
		if time.Now().After(deadline) {
			return rs, []string{fmt.Sprintf("%d of web3gate's records not mined %v after the last block, e.g. %s", len(open), bumpRecordWait, open[0])}, nil
		}
		time.Sleep(200 * time.Millisecond)
	}
}
