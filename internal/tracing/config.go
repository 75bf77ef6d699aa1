package tracing

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `tracing:` section: OpenTelemetry spans of the requests, exported over
// OTLP/HTTP. Off by default.
type Config struct {
	// Enabled turns tracing on. Off, nothing is traced, nothing is exported and no traceparent
	// is sent upstream: the request path pays one nil check.
	Enabled bool `yaml:"enabled"`
	// Endpoint is the OTLP/HTTP receiver: scheme://host[:port][/path]. Without a path (or
	// "/"), /v1/traces is added. No userinfo or query: credentials go in Headers.
	Endpoint string `yaml:"endpoint"`
	// Protocol is the OTLP transport: only "http/protobuf".
	Protocol string `yaml:"protocol"`
	// SampleRatio is the share of new traces recorded, 0 to 1 (default 1). A request whose
	// traceparent says sampled (or not) follows that when TrustIncoming is on.
	SampleRatio *float64 `yaml:"sampleRatio"`
	// TrustIncoming makes the server span of a request with a valid traceparent header its
	// child, following its sampling decision (default true). Off, each request starts a
	// trace of its own.
	TrustIncoming *bool `yaml:"trustIncoming"`
	// ServiceName is the resource's service.name (default "web3gate").
	ServiceName string `yaml:"serviceName"`
	// Headers are sent with each export (for example an Authorization header): secrets,
	// never logged.
	Headers map[string]Secret `yaml:"headers"`
	// Compression of the exports: "none" (default) or "gzip".
	Compression string `yaml:"compression"`
	// Timeout bounds one export request, and the flush at shutdown (default 10s).
	Timeout time.Duration `yaml:"timeout"`
	// QueueSize is the most finished spans waiting for export; more are dropped (default 2048).
	QueueSize int `yaml:"queueSize"`
	// BatchSize is the most spans in one export (default 512).
	BatchSize int `yaml:"batchSize"`
	// Interval is the longest a finished span waits before its batch is exported (default 5s).
	Interval time.Duration `yaml:"interval"`
}

// Secret is a configuration value that must never be printed: formatted, it reads
// "[redacted]".
type Secret string

// String implements fmt.Stringer.
func (Secret) String() string { return "[redacted]" }

// GoString implements fmt.GoStringer.
func (Secret) GoString() string { return `"[redacted]"` }

// ProtocolHTTP is the one OTLP transport offered.
const ProtocolHTTP = "http/protobuf"

// Defaults of the keys.
const (
	DefaultEndpoint    = "http://127.0.0.1:4318"
	DefaultServiceName = "web3gate"
	DefaultTimeout     = 10 * time.Second
	DefaultQueueSize   = 2048
	DefaultBatchSize   = 512
	DefaultInterval    = 5 * time.Second
)

// SetDefaults fills the unset keys.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Endpoint, DefaultEndpoint)
	defaults.Set(&c.Protocol, ProtocolHTTP)
	if c.SampleRatio == nil {
		one := 1.0
		c.SampleRatio = &one
	}
	if c.TrustIncoming == nil {
		yes := true
		c.TrustIncoming = &yes
	}
	defaults.Set(&c.ServiceName, DefaultServiceName)
	defaults.Set(&c.Compression, "none")
	defaults.Set(&c.Timeout, DefaultTimeout)
	defaults.Set(&c.QueueSize, DefaultQueueSize)
	defaults.Set(&c.BatchSize, DefaultBatchSize)
	defaults.Set(&c.Interval, DefaultInterval)
}

// Validate checks c (defaults applied); each message names its key within the section and
// never a header's value.
func (c *Config) Validate() error {
	var errs []error
	if _, err := ExportURL(c.Endpoint); err != nil {
		errs = append(errs, fmt.Errorf("endpoint: %w", err))
	}
	switch c.Protocol {
	case ProtocolHTTP:
	case "grpc":
		errs = append(errs, errors.New(`protocol: grpc is not offered; use http/protobuf (an OTel Collector's or Jaeger's OTLP/HTTP receiver, port 4318)`))
	default:
		errs = append(errs, fmt.Errorf("protocol: %q is not http/protobuf", c.Protocol))
	}
	if r := c.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		errs = append(errs, errors.New("sampleRatio: must be between 0 and 1"))
	}
	if c.ServiceName == "" || len(c.ServiceName) > 255 {
		errs = append(errs, errors.New("serviceName: must have 1 to 255 characters"))
	}
	names := make([]string, 0, len(c.Headers))
	for name := range c.Headers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !validHeaderName(name) {
			errs = append(errs, fmt.Errorf("headers: %q is not a valid HTTP header name", truncate(name, 64)))
			continue
		}
		if !validHeaderValue(string(c.Headers[name])) {
			// The value is a secret: the message names the header only.
			errs = append(errs, fmt.Errorf("headers.%s: the value holds a control character (a line break?)", name))
		}
	}
	switch c.Compression {
	case "none", "gzip":
	default:
		errs = append(errs, fmt.Errorf("compression: %q is not none or gzip", truncate(c.Compression, 32)))
	}
	if c.Timeout < time.Millisecond || c.Timeout > 5*time.Minute {
		errs = append(errs, errors.New("timeout: must be between 1ms and 5m"))
	}
	if c.QueueSize < 1 || c.QueueSize > 1_000_000 {
		errs = append(errs, errors.New("queueSize: must be between 1 and 1000000"))
	}
	if c.BatchSize < 1 || c.BatchSize > c.QueueSize {
		errs = append(errs, errors.New("batchSize: must be between 1 and queueSize"))
	}
	if c.Interval < 10*time.Millisecond || c.Interval > time.Hour {
		errs = append(errs, errors.New("interval: must be between 10ms and 1h"))
	}
	return errors.Join(errs...)
}

// ExportURL is the URL the spans are posted to: the endpoint, with /v1/traces when it has no
// path. It refuses what the exporter cannot use and what would put a secret into a URL
// (userinfo, a query).
func ExportURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	switch {
	case err != nil:
		return "", errors.New("must be an http:// or https:// URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return "", errors.New("must be an http:// or https:// URL")
	case u.Host == "" || u.Hostname() == "":
		return "", errors.New("has no host")
	case u.User != nil:
		return "", errors.New("must not carry credentials: put them in tracing.headers")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", errors.New("must not have a query or a fragment")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// validHeaderName reports whether s is an HTTP token (RFC 9110).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c < 0x80 && contains("!#$%&'*+-.^_`|~", c):
		default:
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s holds no control character but tab.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

func contains(set string, c byte) bool {
	for i := 0; i < len(set); i++ {
		if set[i] == c {
			return true
		}
	}
	return false
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
