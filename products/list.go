package products

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/web3gate/web3gate/proxy"
	"github.com/web3gate/web3gate/store"
)

// The list's page size.
const (
	DefaultLimit = 20
	MaxLimit     = 100
)

// query is what the list reads of a request: RESTRequest's query parameters.
type query interface {
	Query(name string) (string, bool)
	QueryList(name string) []string
}

// ListHandler serves GET /v1/products: {"products": [Product...], "error": null}.
func (s *Service) ListHandler() proxy.RESTHandler {
	return proxy.RESTHandlerFunc(func(r *proxy.RESTRequest) (*proxy.RESTResponse, error) {
		f, err := parseQuery(r, s.now())
		if err != nil {
			return nil, err
		}
		list, err := s.db.Products(r.Ctx, f)
		if err != nil {
			return nil, err
		}
		body, err := listBody(list)
		if err != nil {
			return nil, err
		}
		return &proxy.RESTResponse{Member: "products", Body: body}, nil
	})
}

// listBody is the JSON array of the products, each with totalSold replaced by the figure
// of the sold rule where it differs from the stored one.
func listBody(list []store.ListedProduct) ([]byte, error) {
	n := 2
	for _, p := range list {
		n += len(p.Body) + 1 + 20
	}
	out := make([]byte, 0, n)
	out = append(out, '[')
	for i, p := range list {
		if i > 0 {
			out = append(out, ',')
		}
		if p.Sold == p.StoredSold {
			out = append(out, p.Body...)
			continue
		}
		var err error
		if out, err = appendWithSold(out, p.Body, p.Sold); err != nil {
			return nil, err
		}
	}
	return append(out, ']'), nil
}

var totalSoldKey = []byte(`"totalSold":`)

// appendWithSold appends body, a Product as the store keeps it, with totalSold set to sold.
// The member is the last `"totalSold":` of the body: the fields after it in a Product
// (totalAvailable, prices, auctions, saleType, dates, purchaseLink, username) have fixed
// keys or are strings, and a string cannot hold that text unescaped; only tokenMetadata, an
// object of any shape, could, and it comes before.
func appendWithSold(dst, body []byte, sold int64) ([]byte, error) {
	i := bytes.LastIndex(body, totalSoldKey)
	if i < 0 {
		return nil, fmt.Errorf("stored product without totalSold: %.60s", body)
	}
	j := i + len(totalSoldKey)
	k := j
	for k < len(body) && body[k] >= '0' && body[k] <= '9' {
		k++
	}
	if k == j {
		return nil, fmt.Errorf("stored product with a malformed totalSold: %.60s", body)
	}
	dst = append(dst, body[:j]...)
	dst = strconv.AppendInt(dst, sold, 10)
	return append(dst, body[k:]...), nil
}

// parseQuery reads the list's parameters. A parameter given empty counts as absent, a
// repeated one (but saleType, a list) counts its first value, unknown parameters are
// ignored; any other bad value is a 400 naming the parameter.
func parseQuery(q query, now time.Time) (store.ProductFilter, error) {
	f := store.ProductFilter{Limit: DefaultLimit, LiveAt: now}
	if v, ok := q.Query("baseUrl"); ok && v != "" {
		c, err := CreatorOf(v)
		if err != nil {
			return f, proxy.Errorf(http.StatusBadRequest, "baseUrl: %v", err)
		}
		f.Creator = c
	}
	for _, t := range q.QueryList("saleType") {
		var types []string
		switch t {
		case LimitedEdition, OpenEdition, OffChainAuction, OnChainAuction:
			types = []string{t}
		case "EDITION":
			types = []string{LimitedEdition, OpenEdition}
		case "AUCTION":
			types = []string{OffChainAuction, OnChainAuction}
		default:
			return f, proxy.Errorf(http.StatusBadRequest, "saleType: %q is not one of %s, %s, %s, %s, EDITION, AUCTION",
				clip(t), LimitedEdition, OpenEdition, OffChainAuction, OnChainAuction)
		}
		for _, t := range types {
			if !slices.Contains(f.SaleTypes, t) {
				f.SaleTypes = append(f.SaleTypes, t)
			}
		}
	}
	sold, given, err := proxy.QueryBool(q, "sold")
	if err != nil {
		return f, err
	}
	if given {
		f.Sold = &sold
	}
	if f.IncludeUpcoming, _, err = proxy.QueryBool(q, "includeUpcoming"); err != nil {
		return f, err
	}
	if v, ok := q.Query("liveAt"); ok && v != "" {
		at, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return f, proxy.Errorf(http.StatusBadRequest, "liveAt: must be an RFC 3339 time such as 2026-11-21T15:04:05Z (a + in an offset is written %%2B in a query string)")
		}
		f.LiveAt = at
	}
	if v, ok := q.Query("limit"); ok && v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxLimit {
			return f, proxy.Errorf(http.StatusBadRequest, "limit: must be an integer from 1 to %d", MaxLimit)
		}
		f.Limit = n
	}
	if v, ok := q.Query("offset"); ok && v != "" {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 {
			return f, proxy.Errorf(http.StatusBadRequest, "offset: must be an integer from 0 to %d", math.MaxInt32)
		}
		f.Offset = int(n)
	}
	return f, nil
}

// CreatorOf is the creator a creator page URL names: the path segment that starts with @
// (without it), else the last non-empty segment, lowercased.
func CreatorOf(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errorString("must be an absolute http(s) URL of a creator page, such as https://example.com/@nft_creator")
	}
	var last string
	for _, seg := range strings.Split(u.Path, "/") {
		if strings.HasPrefix(seg, "@") {
			if seg == "@" {
				return "", errorString("the @ segment names no creator")
			}
			return Creator(seg), nil
		}
		if strings.TrimSpace(seg) != "" {
			last = seg
		}
	}
	if last == "" {
		return "", errorString("the URL has no path segment naming a creator, such as /@nft_creator")
	}
	return Creator(last), nil
}

type errorString string

func (e errorString) Error() string { return string(e) }

// clip shortens a client's value for an error message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
