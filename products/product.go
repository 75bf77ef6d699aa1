// Package products is the product catalog behind GET /v1/products: the Product object of
// docs/api-objects.md and its validation (product.go), catalog files and their
// import (file.go, catalog.go), the admin API (admin.go), the public list route (list.go) and
// the rule that takes totalSold from the chain (scope.go).
package products

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/web3gate/web3gate/metadata"
	"github.com/web3gate/web3gate/store"
)

// Sale types. EDITION and AUCTION are filter umbrellas, not stored values.
const (
	LimitedEdition  = "LIMITED_EDITION"
	OpenEdition     = "OPEN_EDITION"
	OffChainAuction = "OFF_CHAIN_AUCTION"
	OnChainAuction  = "ON_CHAIN_AUCTION"
)

// Product is one catalog entry, as the API shows it.
type Product struct {
	ID                   string          `json:"id"`
	Network              string          `json:"network"`
	TokenContractAddress string          `json:"tokenContractAddress"`
	TokenMetadata        json.RawMessage `json:"tokenMetadata"`
	GatedContent         []string        `json:"gatedContent"`
	IsGated              bool            `json:"isGated"`
	TotalSold            int64           `json:"totalSold"`
	TotalAvailable       *int64          `json:"totalAvailable"`
	Prices               []Price         `json:"prices"`
	Auctions             []Auction       `json:"auctions"`
	SaleType             string          `json:"saleType"`
	CreatedAt            time.Time       `json:"createdAt"`
	LiveAt               *time.Time      `json:"liveAt"`
	PreviewAt            *time.Time      `json:"previewAt"`
	SalesEndAt           *time.Time      `json:"salesEndAt"`
	PurchaseLink         *string         `json:"purchaseLink"`
	Username             *string         `json:"username"`
}

// Price is one price of a product.
type Price struct {
	ID       string `json:"id"`
	Currency string `json:"currency"`
	Price    string `json:"price"`
}

// Auction is one auction of a product.
type Auction struct {
	ID                string    `json:"id"`
	TokenID           string    `json:"tokenId"`
	Status            string    `json:"status"`
	StartsAt          time.Time `json:"startsAt"`
	EndsAt            time.Time `json:"endsAt"`
	AuctionContractID string    `json:"auctionContractId"`
}

// required are the fields a product must have (api-objects.md marks them *).
var required = []string{"id", "network", "tokenContractAddress", "tokenMetadata", "gatedContent",
	"isGated", "totalSold", "prices", "auctions", "saleType", "createdAt"}

var (
	networkRE  = regexp.MustCompile(`^[a-z][a-z0-9-]{0,63}$`)
	currencyRE = regexp.MustCompile(`^[A-Z]{3}$`)
	priceRE    = regexp.MustCompile(`^(0|[1-9][0-9]{0,29})(\.[0-9]{1,18})?$`)
)

// Parse reads one product from JSON, strictly: unknown fields, a missing required field, a
// wrong type or an invalid value are errors naming the field.
func Parse(raw []byte) (*Product, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, errors.New("a product must be a JSON object")
	}
	for _, f := range required {
		if v, ok := fields[f]; !ok || string(v) == "null" {
			return nil, fmt.Errorf("%s: required", f)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p Product
	if err := dec.Decode(&p); err != nil {
		return nil, decodeError(err)
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	p.normalize()
	return &p, nil
}

// normalize puts the UUIDs in lowercase, the times in UTC and tokenMetadata in compact form,
// as the store and the API show them.
func (p *Product) normalize() {
	p.ID = strings.ToLower(p.ID)
	var compact bytes.Buffer
	if json.Compact(&compact, p.TokenMetadata) == nil { // decoded as JSON: it compacts
		p.TokenMetadata = compact.Bytes()
	}
	for i := range p.Prices {
		p.Prices[i].ID = strings.ToLower(p.Prices[i].ID)
	}
	utc := func(t *time.Time) *time.Time {
		if t == nil {
			return nil
		}
		u := t.UTC()
		return &u
	}
	p.CreatedAt = p.CreatedAt.UTC()
	p.LiveAt, p.PreviewAt, p.SalesEndAt = utc(p.LiveAt), utc(p.PreviewAt), utc(p.SalesEndAt)
	for i := range p.Auctions {
		p.Auctions[i].StartsAt = p.Auctions[i].StartsAt.UTC()
		p.Auctions[i].EndsAt = p.Auctions[i].EndsAt.UTC()
	}
}

// Creator is the creator key of a username, as baseUrl filters match it: lowercase, without
// a leading @.
func Creator(username string) string {
	return strings.ToLower(strings.TrimPrefix(username, "@"))
}

// row is p as the store keeps it: its JSON and the columns the list filters on.
func (p *Product) row() (*store.ProductRow, error) {
	body, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("product %s: %w", p.ID, err)
	}
	r := &store.ProductRow{ID: p.ID, Network: p.Network, TokenContract: p.TokenContractAddress, SaleType: p.SaleType,
		TotalSold: p.TotalSold, TotalAvailable: p.TotalAvailable, LiveAt: p.LiveAt, SalesEndAt: p.SalesEndAt,
		CreatedAt: p.CreatedAt, Body: body}
	if p.Username != nil {
		r.Creator = Creator(*p.Username)
	}
	return r, nil
}

// decodeError names the field of a JSON decoding error.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("%s: must be %s", te.Field, jsonKind(te.Type.String()))
	}
	var pe *time.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("bad date %q: must be RFC 3339, e.g. 2026-11-21T15:04:05Z", pe.Value)
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return fmt.Errorf("%s: unknown field", strings.Trim(f, `"`))
	}
	return errors.New(strings.TrimPrefix(msg, "json: "))
}

func jsonKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.Contains(goType, "int"):
		return "an integer"
	case goType == "bool":
		return "a boolean"
	case goType == "string", strings.Contains(goType, "Time"):
		return "a string"
	}
	return "an object"
}

// Validate checks the values of a decoded product.
func (p *Product) Validate() error {
	if uuidErr(p.ID) != nil {
		return errors.New("id: must be a UUID")
	}
	if !networkRE.MatchString(p.Network) {
		return errors.New("network: must be a network name such as mainnet or polygon")
	}
	addr, err := metadata.ParseAddress(p.TokenContractAddress)
	if err != nil {
		return fmt.Errorf("tokenContractAddress: %w", err)
	}
	p.TokenContractAddress = strings.ToLower(addr.Hex())
	if t := bytes.TrimSpace(p.TokenMetadata); len(t) == 0 || t[0] != '{' {
		return errors.New("tokenMetadata: must be an object")
	}
	for i, g := range p.GatedContent {
		if strings.TrimSpace(g) == "" {
			return fmt.Errorf("gatedContent[%d]: must not be empty", i)
		}
	}
	if p.TotalSold < 0 {
		return errors.New("totalSold: must not be negative")
	}
	if p.TotalAvailable != nil && *p.TotalAvailable < 0 {
		return errors.New("totalAvailable: must not be negative (null: unlimited)")
	}
	for i, pr := range p.Prices {
		switch {
		case uuidErr(pr.ID) != nil:
			return fmt.Errorf("prices[%d].id: must be a UUID", i)
		case !currencyRE.MatchString(pr.Currency):
			return fmt.Errorf("prices[%d].currency: must be an ISO 4217 code such as USD", i)
		case !priceRE.MatchString(pr.Price):
			return fmt.Errorf("prices[%d].price: must be a decimal string such as \"200.00\"", i)
		}
	}
	for i, a := range p.Auctions {
		switch {
		case strings.TrimSpace(a.ID) == "":
			return fmt.Errorf("auctions[%d].id: required", i)
		case strings.TrimSpace(a.Status) == "":
			return fmt.Errorf("auctions[%d].status: required", i)
		case a.StartsAt.IsZero() || a.EndsAt.IsZero():
			return fmt.Errorf("auctions[%d]: startsAt and endsAt are required", i)
		case a.EndsAt.Before(a.StartsAt):
			return fmt.Errorf("auctions[%d].endsAt: before startsAt", i)
		}
	}
	switch p.SaleType {
	case LimitedEdition, OpenEdition, OffChainAuction, OnChainAuction:
	default:
		return fmt.Errorf("saleType: must be %s, %s, %s or %s", LimitedEdition, OpenEdition, OffChainAuction, OnChainAuction)
	}
	if p.CreatedAt.IsZero() {
		return errors.New("createdAt: required")
	}
	if p.SalesEndAt != nil && p.LiveAt != nil && p.SalesEndAt.Before(*p.LiveAt) {
		return errors.New("salesEndAt: before liveAt")
	}
	if p.PurchaseLink != nil {
		u, err := url.Parse(*p.PurchaseLink)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return errors.New("purchaseLink: must be an http(s) URL")
		}
	}
	if p.Username != nil {
		switch u := *p.Username; {
		case strings.TrimSpace(Creator(u)) == "":
			return errors.New("username: must not be empty (null when there is none)")
		case strings.Contains(u, "/"):
			return errors.New("username: must not contain / (baseUrl filters match it as one path segment)")
		case strings.ContainsRune(u, 0):
			return errors.New("username: must not contain a NUL character")
		}
	}
	return nil
}

// uuidErr checks s is a UUID in its canonical 36-character form (uuid.Parse also takes
// braces, a urn:uuid: prefix and no hyphens).
func uuidErr(s string) error {
	if len(s) != 36 {
		return errors.New("not a UUID")
	}
	_, err := uuid.Parse(s)
	return err
}
