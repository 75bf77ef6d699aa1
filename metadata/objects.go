package metadata

import (
	"encoding/json"
	"math/big"
	"time"
)

// CoinTypeEVM is SLIP-44's coin type of Ethereum, which every EVM chain shares here.
const CoinTypeEVM = 60

// Token is the `token` member of GET /v1/tokens/{coinType}/{chainId}/{contractAddress}/{tokenId}
// (docs/api-objects.md).
type Token struct {
	CoinType        int             `json:"coinType"`
	ChainID         uint64          `json:"chainId"`
	ContractAddress string          `json:"contractAddress"`
	ID              string          `json:"id"`
	TokenType       string          `json:"tokenType"`
	TokenURI        *string         `json:"tokenUri"`
	Metadata        TokenMetadata   `json:"metadata"`
	RawMetadata     json.RawMessage `json:"rawMetadata"` // nil: null
	MetadataError   *string         `json:"metadataError"`
	TimeLastUpdated string          `json:"timeLastUpdated"`
}

// Contract is the `contract` member of GET /v1/tokens/{coinType}/{chainId}/{contractAddress}.
// MetadataError is an extension: why the contractURI document is missing.
type Contract struct {
	CoinType        int               `json:"coinType"`
	ChainID         uint64            `json:"chainId"`
	Address         string            `json:"address"`
	TokenType       string            `json:"tokenType"`
	Name            *string           `json:"name"`
	Symbol          *string           `json:"symbol"`
	Decimals        *uint8            `json:"decimals"`
	TotalSupply     *string           `json:"totalSupply"`
	ContractURI     *string           `json:"contractUri"`
	Metadata        *ContractMetadata `json:"metadata"`
	MetadataError   *string           `json:"metadataError"`
	TimeLastUpdated string            `json:"timeLastUpdated"`
}

// hexID is a token id as the API returns it: 0x-hex, lowercase, no leading zeros.
func hexID(id *big.Int) string { return "0x" + id.Text(16) }

// timeString is how timeLastUpdated is written.
func timeString(t time.Time) string { return t.UTC().Format(time.RFC3339) }

func ptr[T any](v T) *T { return &v }
