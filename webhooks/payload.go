package webhooks

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/store"
)

// Event is the JSON body of a delivery: one state change of one transaction request.
type Event struct {
	// ID is "evt_<seq>": unique, the same in every attempt (and in EventIDHeader).
	ID string `json:"id"`
	// Type is "transaction." and the new state: broadcast, mined, confirmed, failed,
	// released, abandoned, stuck, cancelled.
	Type string `json:"type"`
	// CreatedAt is when the state changed (RFC 3339, UTC).
	CreatedAt   time.Time        `json:"createdAt"`
	Transaction EventTransaction `json:"transaction"`
}

// EventTransaction is the transaction request as it was at the change.
type EventTransaction struct {
	// ID is "tx_<n>": one per request, the same for every event of it (its hash may change
	// when a fee bump replaces it).
	ID string `json:"id"`
	// Kind is send (eth_sendTransaction), sign (eth_signTransaction, sent by the caller) or
	// filler (a zero-value self-transfer web3gate sent to fill a nonce a request gave up).
	Kind string  `json:"kind"`
	Hash *string `json:"hash"` // the hash the caller was given; null before it was signed
	// MinedHash is the hash of the version in the block (mined, confirmed, cancelled): the
	// original hash, or that of a fee bump, speed-up or cancel that replaced it; else null.
	MinedHash *string `json:"minedHash"`
	ChainID   uint64  `json:"chainId"`
	From      string  `json:"from"` // EIP-55 checksummed
	Nonce     uint64  `json:"nonce"`
	State     string  `json:"state"`
	// BlockNumber and BlockHash: the block that holds it (mined, confirmed), else null.
	BlockNumber *uint64 `json:"blockNumber"`
	BlockHash   *string `json:"blockHash"`
	// Error says why it failed (the revert reason), was abandoned or is stuck (the cap that
	// stopped the bumps); else null.
	Error *string `json:"error"`
}

// EventID is the id of the event seq.
func EventID(seq int64) string { return "evt_" + strconv.FormatInt(seq, 10) }

// newEvent is the payload of e.
func newEvent(e store.WebhookEvent) Event {
	opt := func(s string) *string {
		if s == "" {
			return nil
		}
		return &s
	}
	return Event{
		ID:        EventID(e.Seq),
		Type:      "transaction." + e.State,
		CreatedAt: e.CreatedAt.UTC(),
		Transaction: EventTransaction{
			ID:          "tx_" + strconv.FormatInt(e.TxID, 10),
			Kind:        e.Kind,
			Hash:        opt(e.Hash),
			MinedHash:   opt(e.MinedHash),
			ChainID:     e.ChainID,
			From:        common.HexToAddress(e.From).Hex(),
			Nonce:       e.Nonce,
			State:       e.State,
			BlockNumber: e.BlockNumber,
			BlockHash:   opt(e.BlockHash),
			Error:       opt(e.Error),
		},
	}
}

func (ev Event) body() ([]byte, error) { return json.Marshal(ev) }
