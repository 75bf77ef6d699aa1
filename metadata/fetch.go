package metadata

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
	"github.com/web3gate/web3gate/internal/netpolicy"
)

// FetcherConfig is the `metadata.fetcher:` section: how metadata documents are fetched from
// the URIs contracts publish. Those URIs are chosen by whoever deployed the contract, so every
// connection is checked against an address policy (no loopback, private, link-local or cloud
// metadata addresses) at connect time.
type FetcherConfig struct {
	// AllowNetworks are CIDR prefixes (or single addresses) exempt from the address policy,
	// e.g. a private IPFS gateway. Empty by default.
	AllowNetworks []string `yaml:"allowNetworks"`
	// MaxBytes is the largest document accepted, after decompression. Default 1 MiB.
	MaxBytes int64 `yaml:"maxBytes"`
	// Timeout bounds one whole fetch: connecting, redirects and reading the body. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
	// MaxRedirects is how many redirects one fetch follows, at most 10; -1 follows none.
	// Default 3.
	MaxRedirects int `yaml:"maxRedirects"`
	// DNSServer is the ip:port of a DNS server for the fetcher's lookups; empty: the system
	// resolver.
	DNSServer string `yaml:"dnsServer"`
	// UserAgent is sent with every request. Default "web3gate-metadata/1".
	UserAgent string `yaml:"userAgent"`
}

const maxMaxRedirects = 10

// SetDefaults fills unset fields with their defaults.
func (c *FetcherConfig) SetDefaults() {
	defaults.Set(&c.MaxBytes, 1<<20)
	defaults.Set(&c.Timeout, 10*time.Second)
	defaults.Set(&c.MaxRedirects, 3)
	defaults.Set(&c.UserAgent, "web3gate-metadata/1")
}

// Validate checks c; each message names its key within the section.
func (c *FetcherConfig) Validate() error {
	var errs []error
	if _, err := netpolicy.New(c.AllowNetworks); err != nil {
		errs = append(errs, err)
	}
	if c.MaxBytes < 1024 || c.MaxBytes > 64<<20 {
		errs = append(errs, errors.New("maxBytes: must be between 1024 and 67108864 (64 MiB)"))
	}
	if c.Timeout < 100*time.Millisecond {
		errs = append(errs, errors.New("timeout: must be at least 100ms"))
	}
	if c.MaxRedirects < -1 || c.MaxRedirects > maxMaxRedirects {
		errs = append(errs, fmt.Errorf("maxRedirects: must be between -1 (none) and %d", maxMaxRedirects))
	}
	if c.DNSServer != "" {
		if _, err := netip.ParseAddrPort(c.DNSServer); err != nil {
			errs = append(errs, fmt.Errorf("dnsServer: %q is not an ip:port such as 1.1.1.1:53", c.DNSServer))
		}
	}
	if strings.ContainsFunc(c.UserAgent, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		errs = append(errs, errors.New("userAgent: must not contain control characters"))
	}
	return errors.Join(errs...)
}

// FetchError says why a metadata document could not be had. Reason is a short fixed phrase
// safe to show to API callers: it never carries the document, the host name or an address.
// The underlying cause, when there is one worth branching on (ErrAddressNotAllowed,
// context.DeadlineExceeded, context.Canceled), is reachable with errors.Is.
type FetchError struct {
	Reason string
	cause  error
}

func (e *FetchError) Error() string { return e.Reason }

func (e *FetchError) Unwrap() error { return e.cause }

func failure(reason string) *FetchError { return &FetchError{Reason: reason} }

// Reasons of FetchError that are not built from a status code.
const (
	reasonNotAllowed     = "destination address not allowed"
	reasonScheme         = "unsupported URI scheme"
	reasonRedirectScheme = "redirect to an unsupported URI scheme"
	reasonInvalidURI     = "invalid URI"
	reasonRedirects      = "too many redirects"
	reasonTimeout        = "gateway timeout"
	reasonCanceled       = "fetch canceled"
	reasonConnection     = "connection failed"
	reasonTLS            = "TLS handshake failed"
	reasonHostNotFound   = "host not found"
	reasonTooLarge       = "document too large"
	reasonNotJSON        = "not a JSON document"
	reasonNoURI          = "no metadata URI"
	reasonNoGateway      = "no gateway configured for this URI"
	reasonDataMediaType  = "unsupported data URI media type"
	reasonDataEncoding   = "invalid data URI"
	reasonBrokenResponse = "document server sent a broken response"
)

// Fetcher fetches metadata documents over HTTP(S) from hostile URIs. It is safe for
// concurrent use; its Transport is shared by all fetches.
type Fetcher struct {
	cfg    FetcherConfig
	client *http.Client
}

// NewFetcher builds a Fetcher; unset fields of cfg take their defaults.
func NewFetcher(cfg FetcherConfig) (*Fetcher, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	policy, err := netpolicy.New(cfg.AllowNetworks)
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{
		Timeout:   cfg.Timeout,
		KeepAlive: 30 * time.Second,
		Control:   policy.Control,
	}
	if cfg.DNSServer != "" {
		server := cfg.DNSServer
		dnsDialer := &net.Dialer{Timeout: 5 * time.Second} // the DNS server is trusted configuration
		dialer.Resolver = &net.Resolver{
			PreferGo: true,
			Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return dnsDialer.DialContext(ctx, network, server)
			},
		}
	}
	transport := &http.Transport{
		Proxy:                  nil, // never the environment's proxies
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    8, // most fetches go to a few gateways
		IdleConnTimeout:        60 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	maxRedirects := max(cfg.MaxRedirects, 0)
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return failure(reasonRedirects)
			}
			if s := req.URL.Scheme; s != "http" && s != "https" {
				return failure(reasonRedirectScheme)
			}
			if req.URL.Host == "" {
				return failure(reasonInvalidURI)
			}
			return nil
		},
	}
	return &Fetcher{cfg: cfg, client: client}, nil
}

// CloseIdleConnections closes the idle connections of the shared Transport.
func (f *Fetcher) CloseIdleConnections() { f.client.CloseIdleConnections() }

// Fetch gets the document at rawURL (http or https) and returns its body, which is a JSON
// object. Every error is a *FetchError.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) ([]byte, error) {
	u, err := url.Parse(strings.TrimSpace(rawURL))
	if err != nil {
		return nil, failure(reasonInvalidURI)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, failure(reasonScheme)
	}
	if u.Hostname() == "" {
		return nil, failure(reasonInvalidURI)
	}
	u.Fragment, u.RawFragment = "", ""

	fctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, failure(reasonInvalidURI)
	}
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	req.Header.Set("Accept", "application/json, */*;q=0.5")

	resp, err := f.client.Do(req)
	if err != nil {
		return nil, f.classify(ctx, fctx, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, failure("document server answered HTTP " + strconv.Itoa(resp.StatusCode))
	}
	if resp.ContentLength > f.cfg.MaxBytes {
		return nil, failure(reasonTooLarge)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxBytes+1))
	if err != nil {
		return nil, f.classify(ctx, fctx, err)
	}
	if int64(len(body)) > f.cfg.MaxBytes {
		return nil, failure(reasonTooLarge)
	}
	return jsonObject(body)
}

// classify turns a transport error into a FetchError with a fixed reason. ctx is the
// caller's context, fctx the fetch's own (with the timeout).
func (f *Fetcher) classify(ctx, fctx context.Context, err error) error {
	var fe *FetchError
	var dnsErr *net.DNSError
	var netErr net.Error
	var certErr *tls.CertificateVerificationError
	var recErr tls.RecordHeaderError
	var alertErr tls.AlertError
	var flateErr flate.CorruptInputError
	switch {
	case errors.Is(err, ErrAddressNotAllowed):
		return &FetchError{Reason: reasonNotAllowed, cause: ErrAddressNotAllowed}
	case errors.As(err, &fe):
		return fe
	case errors.Is(ctx.Err(), context.Canceled):
		return &FetchError{Reason: reasonCanceled, cause: context.Canceled}
	case fctx.Err() != nil, errors.As(err, &netErr) && netErr.Timeout():
		return &FetchError{Reason: reasonTimeout, cause: context.DeadlineExceeded}
	case errors.As(err, &dnsErr):
		return failure(reasonHostNotFound)
	case errors.As(err, &certErr), errors.As(err, &recErr), errors.As(err, &alertErr):
		return failure(reasonTLS)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, gzip.ErrHeader),
		errors.Is(err, gzip.ErrChecksum), errors.As(err, &flateErr):
		return failure(reasonBrokenResponse)
	}
	return failure(reasonConnection)
}

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// jsonObject returns doc, without a byte order mark and surrounding white space, if it is a
// JSON object, else a FetchError "not a JSON document".
func jsonObject(doc []byte) ([]byte, error) {
	doc = bytes.TrimSpace(bytes.TrimPrefix(doc, utf8BOM))
	if len(doc) == 0 || doc[0] != '{' || !json.Valid(doc) {
		return nil, failure(reasonNotJSON)
	}
	return doc, nil
}
