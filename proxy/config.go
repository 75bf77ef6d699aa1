package proxy

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Config is the `server:` section: the public listener and its limits.
type Config struct {
	Listen           string `yaml:"listen"`
	MaxBodyBytes     int    `yaml:"maxBodyBytes"`
	MaxBatch         int    `yaml:"maxBatch"`
	BatchConcurrency int    `yaml:"batchConcurrency"`
	// MaxHeaderBytes bounds a request's head: its request line and header fields.
	MaxHeaderBytes int `yaml:"maxHeaderBytes"`
	// MaxBodyBytesInFlight bounds the memory of the request bodies read as they arrive (those
	// over streamedBodyOver bytes), all connections together.
	MaxBodyBytesInFlight int `yaml:"maxBodyBytesInFlight"`
	// MaxConns bounds the open connections; MaxConnsPerIP those of one source address (equal
	// to MaxConns: no limit of its own).
	MaxConns      int           `yaml:"maxConns"`
	MaxConnsPerIP int           `yaml:"maxConnsPerIP"`
	HeaderTimeout time.Duration `yaml:"headerTimeout"`
	ReadTimeout   time.Duration `yaml:"readTimeout"`
	WriteTimeout  time.Duration `yaml:"writeTimeout"`
	IdleTimeout   time.Duration `yaml:"idleTimeout"`
	// ShutdownTimeout is how long in-flight requests get to finish on SIGINT/SIGTERM.
	ShutdownTimeout time.Duration `yaml:"shutdownTimeout"`
	// CORS says which browser pages may read the public API's answers.
	CORS CORSConfig `yaml:"cors"`
	// WebSocket is JSON-RPC over WebSocket on the JSON-RPC routes, and its limits.
	WebSocket WebSocketConfig `yaml:"websocket"`
	// TrustedProxies are the addresses (CIDRs, or single IPs) of the proxies in front of
	// web3gate whose X-Forwarded-For header tells a request's source address; empty: none
	// (the TCP peer is the source).
	TrustedProxies []string `yaml:"trustedProxies"`
}

// WebSocketConfig is `server.websocket`: JSON-RPC and eth_subscribe over WebSocket on the
// JSON-RPC routes.
type WebSocketConfig struct {
	// Enabled serves GET with Upgrade: websocket on the JSON-RPC routes (default true; see
	// config.Default).
	Enabled bool `yaml:"enabled"`
	// MaxConnsPerClient bounds the open sockets of one client id; one more is answered 429 at
	// the upgrade.
	MaxConnsPerClient int `yaml:"maxConnsPerClient"`
	// MaxSubscriptionsPerConn bounds the subscriptions of one socket; one more is -32005.
	MaxSubscriptionsPerConn int `yaml:"maxSubscriptionsPerConn"`
	// MaxMessageBytes bounds a message from the client; a longer one closes the socket (1009).
	MaxMessageBytes int `yaml:"maxMessageBytes"`
	// QueueSize bounds the messages (answers and notifications) queued for one socket and not
	// yet written; a socket whose queue is full is closed (1008, slow consumer).
	QueueSize int `yaml:"queueSize"`
	// WriteTimeout bounds a write to the socket that has to wait for room: what is queued, up
	// to 128 KiB of messages (or one longer message).
	WriteTimeout time.Duration `yaml:"writeTimeout"`
	// PingInterval is how often the server pings; a peer from which nothing arrives (not even
	// a pong) within twice this is closed.
	PingInterval time.Duration `yaml:"pingInterval"`
	// IdleTimeout closes a socket without subscriptions that has sent no message this long.
	IdleTimeout time.Duration `yaml:"idleTimeout"`
}

// SetDefaults fills unset fields with their defaults (Enabled: see config.Default).
func (c *WebSocketConfig) SetDefaults() {
	defaults.Set(&c.MaxConnsPerClient, 100)
	defaults.Set(&c.MaxSubscriptionsPerConn, 100)
	defaults.Set(&c.MaxMessageBytes, 1<<20)
	defaults.Set(&c.QueueSize, 1024)
	defaults.Set(&c.WriteTimeout, 10*time.Second)
	defaults.Set(&c.PingInterval, 30*time.Second)
	defaults.Set(&c.IdleTimeout, 5*time.Minute)
}

// problems checks c against the server's limits; each message names its key within the
// server section.
func (c *WebSocketConfig) problems(maxConns, maxBodyBytesInFlight int) []error {
	var errs []error
	if c.MaxConnsPerClient < 1 || c.MaxConnsPerClient > maxConns {
		errs = append(errs, fmt.Errorf("websocket.maxConnsPerClient: must be between 1 and maxConns (%d)", maxConns))
	}
	if c.MaxSubscriptionsPerConn < 1 || c.MaxSubscriptionsPerConn > 100000 {
		errs = append(errs, errors.New("websocket.maxSubscriptionsPerConn: must be between 1 and 100000"))
	}
	if c.MaxMessageBytes < 1024 || c.MaxMessageBytes > maxBodyBytesInFlight {
		errs = append(errs, fmt.Errorf("websocket.maxMessageBytes: must be between 1024 and maxBodyBytesInFlight (%d)", maxBodyBytesInFlight))
	}
	if c.QueueSize < 1 || c.QueueSize > 1<<20 {
		errs = append(errs, errors.New("websocket.queueSize: must be between 1 and 1048576"))
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"writeTimeout", c.WriteTimeout}, {"pingInterval", c.PingInterval}, {"idleTimeout", c.IdleTimeout}} {
		if d.v < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("websocket.%s: must be at least 100ms", d.key))
		}
	}
	return errs
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Listen, "127.0.0.1:8545")
	defaults.Set(&c.MaxBodyBytes, 5<<20)
	defaults.Set(&c.MaxBatch, 100)
	defaults.Set(&c.BatchConcurrency, 8)
	defaults.Set(&c.MaxHeaderBytes, 16<<10)
	defaults.Set(&c.MaxBodyBytesInFlight, 256<<20)
	defaults.Set(&c.MaxConns, 8192)
	defaults.Set(&c.MaxConnsPerIP, 1024)
	defaults.Set(&c.HeaderTimeout, 10*time.Second)
	defaults.Set(&c.ReadTimeout, 30*time.Second)
	defaults.Set(&c.WriteTimeout, 30*time.Second)
	defaults.Set(&c.IdleTimeout, 120*time.Second)
	defaults.Set(&c.ShutdownTimeout, 10*time.Second)
	c.CORS.SetDefaults()
	c.WebSocket.SetDefaults()
}

// Validate checks c; each message names its key within the section.
func (c *Config) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port", c.Listen))
	}
	if c.MaxBodyBytes < 1024 {
		errs = append(errs, errors.New("maxBodyBytes: must be at least 1024"))
	}
	if c.MaxBatch < 1 || c.MaxBatch > 10000 {
		errs = append(errs, errors.New("maxBatch: must be between 1 and 10000"))
	}
	if c.BatchConcurrency < 1 || c.BatchConcurrency > 1000 {
		errs = append(errs, errors.New("batchConcurrency: must be between 1 and 1000"))
	}
	if c.MaxHeaderBytes < 4096 || c.MaxHeaderBytes > 1<<20 {
		errs = append(errs, errors.New("maxHeaderBytes: must be between 4096 and 1048576"))
	}
	if c.MaxBodyBytesInFlight < c.MaxBodyBytes {
		errs = append(errs, fmt.Errorf("maxBodyBytesInFlight: must be at least maxBodyBytes (%d)", c.MaxBodyBytes))
	}
	if c.MaxConns < 1 || c.MaxConns > 1<<20 {
		errs = append(errs, errors.New("maxConns: must be between 1 and 1048576"))
	}
	if c.MaxConnsPerIP < 1 || c.MaxConnsPerIP > c.MaxConns {
		errs = append(errs, fmt.Errorf("maxConnsPerIP: must be between 1 and maxConns (%d)", c.MaxConns))
	}
	for i, p := range c.TrustedProxies {
		if _, err := parsePrefix(p); err != nil {
			errs = append(errs, fmt.Errorf("trustedProxies[%d]: %q is not a CIDR (10.0.0.0/8, fd00::/8) or an IP address", i, p))
		}
	}
	errs = append(errs, c.CORS.problems()...)
	errs = append(errs, c.WebSocket.problems(c.MaxConns, c.MaxBodyBytesInFlight)...)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"headerTimeout", c.HeaderTimeout}, {"readTimeout", c.ReadTimeout}, {"writeTimeout", c.WriteTimeout}, {"idleTimeout", c.IdleTimeout}, {"shutdownTimeout", c.ShutdownTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration", d.key))
		}
	}
	if c.HeaderTimeout > c.ReadTimeout {
		errs = append(errs, errors.New("headerTimeout: must not exceed readTimeout"))
	}
	return errors.Join(errs...)
}

// AdminConfig is the `admin:` section: the listener of /metrics, /healthz and /readyz.
type AdminConfig struct {
	Listen string `yaml:"listen"`
	// ReadyTimeout bounds how long /readyz waits for the store to answer before it reports
	// the replica unavailable. Default 2s.
	ReadyTimeout time.Duration `yaml:"readyTimeout"`
}

// SetDefaults fills unset fields with their defaults.
func (c *AdminConfig) SetDefaults() {
	defaults.Set(&c.Listen, "127.0.0.1:9545")
	defaults.Set(&c.ReadyTimeout, 2*time.Second)
}

// Validate checks c.
func (c *AdminConfig) Validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		errs = append(errs, fmt.Errorf("listen: %q is not host:port", c.Listen))
	}
	if c.ReadyTimeout < time.Millisecond {
		errs = append(errs, errors.New("readyTimeout: must be at least 1ms"))
	}
	return errors.Join(errs...)
}
