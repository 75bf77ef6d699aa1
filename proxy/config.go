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
	// FreeMemoryAfterDrop: once the bytes held by request bodies and WebSocket queues
	// (both budgets together) have fallen this far below their peak, the memory freed is
	// returned to the operating system within freeMemorySettle (debug.FreeOSMemory, at most
	// every freeMemoryInterval) rather than over minutes. Default 64 MiB; -1: never.
	FreeMemoryAfterDrop int `yaml:"freeMemoryAfterDrop"`
	// DrainDelay is how long the listeners keep serving after SIGINT/SIGTERM while /readyz
	// answers 503, so that load balancers stop sending before the listeners close
	// (docs/health.md). Default DefaultDrainDelay (see config.Default); 0: none.
	DrainDelay time.Duration `yaml:"drainDelay"`
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
	// MaxConnsPerPrincipal bounds the open sockets of one principal (an access token's
	// subject), over all client ids; MaxConnsPerAddress those of one source address (the
	// one server.trustedProxies name). One more is answered 429 at the upgrade, and is not
	// counted against the client id. Both are below MaxConnsPerClient by default, so that no
	// one principal or address alone can take all of a client id's sockets: client ids are
	// public.
	MaxConnsPerPrincipal int `yaml:"maxConnsPerPrincipal"`
	MaxConnsPerAddress   int `yaml:"maxConnsPerAddress"`
	// MaxSubscriptionsPerConn bounds the subscriptions of one socket; one more is -32005.
	MaxSubscriptionsPerConn int `yaml:"maxSubscriptionsPerConn"`
	// MaxMessageBytes bounds a message from the client; a longer one closes the socket (1009).
	MaxMessageBytes int `yaml:"maxMessageBytes"`
	// QueueSize bounds the messages (answers and notifications) queued for one socket and not
	// yet written; a socket whose queue is full is closed (1008, slow consumer).
	QueueSize int `yaml:"queueSize"`
	// MaxQueuedBytes bounds the bytes of those messages, per socket. An answer that would
	// exceed it is not sent: the call is answered -32005 instead (a call that comes while
	// the bound is reached is not served at all); a notification that would exceed it
	// closes the socket (1008, slow consumer).
	MaxQueuedBytes int `yaml:"maxQueuedBytes"`
	// MaxQueuedBytesTotal bounds the bytes of the answers queued and not yet written, all
	// sockets together; an answer over it is answered -32005 instead.
	MaxQueuedBytesTotal int `yaml:"maxQueuedBytesTotal"`
	// MaxCallsInFlightPerConn bounds the calls of one socket being served at once (a batch
	// counts its calls, at most this many); the socket's next message is read once calls
	// end.
	MaxCallsInFlightPerConn int `yaml:"maxCallsInFlightPerConn"`
	// MessageReadTimeout bounds the time a message of the client takes to arrive whole,
	// from its first frame's header: a client that sends a message slowly (or a part of it,
	// then stalls) is closed when it runs out, whatever it sends meanwhile.
	MessageReadTimeout time.Duration `yaml:"messageReadTimeout"`
	// LogsCriteria bounds the filter of an eth_subscribe "logs" subscription.
	LogsCriteria LogsCriteriaConfig `yaml:"logsCriteria"`
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
	defaults.Set(&c.MaxConnsPerPrincipal, 20)
	defaults.Set(&c.MaxConnsPerAddress, 50)
	defaults.Set(&c.MaxSubscriptionsPerConn, 100)
	defaults.Set(&c.MaxMessageBytes, 1<<20)
	defaults.Set(&c.QueueSize, 1024)
	defaults.Set(&c.MaxQueuedBytes, 16<<20)
	defaults.Set(&c.MaxQueuedBytesTotal, 128<<20)
	defaults.Set(&c.MaxCallsInFlightPerConn, 8)
	defaults.Set(&c.MessageReadTimeout, 10*time.Second)
	c.LogsCriteria.SetDefaults()
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
	if c.MaxConnsPerPrincipal < 1 || c.MaxConnsPerPrincipal > maxConns {
		errs = append(errs, fmt.Errorf("websocket.maxConnsPerPrincipal: must be between 1 and maxConns (%d)", maxConns))
	}
	if c.MaxConnsPerAddress < 1 || c.MaxConnsPerAddress > maxConns {
		errs = append(errs, fmt.Errorf("websocket.maxConnsPerAddress: must be between 1 and maxConns (%d)", maxConns))
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
	if c.MaxQueuedBytesTotal < 64<<10 {
		errs = append(errs, errors.New("websocket.maxQueuedBytesTotal: must be at least 65536"))
	}
	if c.MaxQueuedBytes < 4096 || c.MaxQueuedBytes > c.MaxQueuedBytesTotal {
		errs = append(errs, fmt.Errorf("websocket.maxQueuedBytes: must be between 4096 and maxQueuedBytesTotal (%d)", c.MaxQueuedBytesTotal))
	}
	if c.MaxCallsInFlightPerConn < 1 || c.MaxCallsInFlightPerConn > 10000 {
		errs = append(errs, errors.New("websocket.maxCallsInFlightPerConn: must be between 1 and 10000"))
	}
	errs = append(errs, c.LogsCriteria.problems()...)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"writeTimeout", c.WriteTimeout}, {"pingInterval", c.PingInterval}, {"idleTimeout", c.IdleTimeout}, {"messageReadTimeout", c.MessageReadTimeout}} {
		if d.v < 100*time.Millisecond {
			errs = append(errs, fmt.Errorf("websocket.%s: must be at least 100ms", d.key))
		}
	}
	return errs
}

// LogsCriteriaConfig is `server.websocket.logsCriteria`: the bounds of a logs subscription's
// filter, which the subscription holds (and matches every block's logs against) while it
// lives. A filter over one is refused with -32602.
type LogsCriteriaConfig struct {
	// MaxAddresses bounds the addresses of "address" (geth's own limit: 1000).
	MaxAddresses int `yaml:"maxAddresses"`
	// MaxTopicsPerPosition bounds the hashes of one position of "topics" (geth's: 1000).
	MaxTopicsPerPosition int `yaml:"maxTopicsPerPosition"`
	// MaxProduct bounds the addresses (at least 1) times the hashes of all positions (at
	// least 1).
	MaxProduct int `yaml:"maxProduct"`
	// MaxBytes bounds the filter object's JSON.
	MaxBytes int `yaml:"maxBytes"`
}

// SetDefaults fills unset fields with their defaults.
func (c *LogsCriteriaConfig) SetDefaults() {
	defaults.Set(&c.MaxAddresses, 1000)
	defaults.Set(&c.MaxTopicsPerPosition, 1000)
	defaults.Set(&c.MaxProduct, 10000)
	defaults.Set(&c.MaxBytes, 64<<10)
}

func (c *LogsCriteriaConfig) problems() []error {
	var errs []error
	if c.MaxAddresses < 1 || c.MaxAddresses > 1000 {
		errs = append(errs, errors.New("websocket.logsCriteria.maxAddresses: must be between 1 and 1000"))
	}
	if c.MaxTopicsPerPosition < 1 || c.MaxTopicsPerPosition > 1000 {
		errs = append(errs, errors.New("websocket.logsCriteria.maxTopicsPerPosition: must be between 1 and 1000"))
	}
	if c.MaxProduct < 1 {
		errs = append(errs, errors.New("websocket.logsCriteria.maxProduct: must be at least 1"))
	}
	if c.MaxBytes < 1024 || c.MaxBytes > 1<<20 {
		errs = append(errs, errors.New("websocket.logsCriteria.maxBytes: must be between 1024 and 1048576"))
	}
	return errs
}

// DefaultDrainDelay is server.drainDelay when the key is absent: a few of a load balancer's
// health check intervals.
const DefaultDrainDelay = 5 * time.Second

// SetDefaults fills unset fields with their defaults (DrainDelay: see config.Default).
func (c *Config) SetDefaults() {
	defaults.Set(&c.Listen, "127.0.0.1:8545")
	defaults.Set(&c.MaxBodyBytes, 5<<20)
	defaults.Set(&c.MaxBatch, 100)
	defaults.Set(&c.BatchConcurrency, 8)
	defaults.Set(&c.MaxHeaderBytes, 16<<10)
	defaults.Set(&c.MaxBodyBytesInFlight, 256<<20)
	defaults.Set(&c.FreeMemoryAfterDrop, 64<<20)
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
	if c.FreeMemoryAfterDrop < -1 {
		errs = append(errs, errors.New("freeMemoryAfterDrop: must be -1 (never) or a number of bytes"))
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
	if c.DrainDelay < 0 || c.DrainDelay > 5*time.Minute {
		errs = append(errs, errors.New("drainDelay: must be between 0s and 5m"))
	}
	if c.HeaderTimeout > c.ReadTimeout {
		errs = append(errs, errors.New("headerTimeout: must not exceed readTimeout"))
	}
	return errors.Join(errs...)
}

// AdminConfig is the `admin:` section: the listener of /metrics, /healthz and /readyz,
// and the admin APIs.
type AdminConfig struct {
	Listen string `yaml:"listen"`
	// Tokens are the bearer tokens every admin API route accepts (products, OAuth clients,
	// usage, webhooks, leases). None: those routes answer 403. /healthz, /readyz and
	// /metrics need none.
	Tokens []AdminToken `yaml:"tokens"`
	// ReadyTimeout bounds how long /readyz waits for the store to answer before it reports
	// the replica unavailable. Default 2s.
	ReadyTimeout time.Duration `yaml:"readyTimeout"`
}

// SetDefaults fills unset fields with their defaults.
func (c *AdminConfig) SetDefaults() {
	defaults.Set(&c.Listen, "127.0.0.1:9545")
	defaults.Set(&c.ReadyTimeout, 2*time.Second)
	for i := range c.Tokens {
		defaults.Set(&c.Tokens[i].Name, fmt.Sprintf("tokens[%d]", i))
	}
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
	errs = append(errs, CheckAdminTokens("tokens", c.Tokens)...)
	return errors.Join(errs...)
}
