package proxy

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaultsValidate(t *testing.T) {
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.MaxHeaderBytes != 16384 || c.MaxBodyBytesInFlight != 256<<20 || c.MaxConns != 8192 || c.MaxConnsPerIP != 1024 || c.HeaderTimeout != 10*time.Second {
		t.Fatalf("defaults %+v", c)
	}
	if w := c.WebSocket; w.MaxConnsPerClient != 100 || w.MaxConnsPerPrincipal != 20 || w.MaxConnsPerAddress != 50 || w.MaxSubscriptionsPerConn != 100 || w.MaxMessageBytes != 1<<20 || w.QueueSize != 1024 ||
		w.WriteTimeout != 10*time.Second || w.PingInterval != 30*time.Second || w.IdleTimeout != 5*time.Minute {
		t.Fatalf("websocket defaults %+v", w)
	}
}

func TestConfigValidateLimits(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"small head", func(c *Config) { c.MaxHeaderBytes = 1000 }, "maxHeaderBytes: must be between 4096 and 1048576"},
		{"huge head", func(c *Config) { c.MaxHeaderBytes = 2 << 20 }, "maxHeaderBytes: must be between 4096 and 1048576"},
		{"budget under one body", func(c *Config) { c.MaxBodyBytesInFlight = c.MaxBodyBytes - 1 }, "maxBodyBytesInFlight: must be at least maxBodyBytes (5242880)"},
		{"no connections", func(c *Config) { c.MaxConns = -1 }, "maxConns: must be between 1 and 1048576"},
		{"per address over all", func(c *Config) { c.MaxConnsPerIP = c.MaxConns + 1 }, "maxConnsPerIP: must be between 1 and maxConns (8192)"},
		{"per address negative", func(c *Config) { c.MaxConnsPerIP = -1 }, "maxConnsPerIP: must be between 1 and maxConns (8192)"},
		{"header timeout negative", func(c *Config) { c.HeaderTimeout = -time.Second }, "headerTimeout: must be a positive duration"},
		{"header timeout over read timeout", func(c *Config) { c.HeaderTimeout = time.Minute }, "headerTimeout: must not exceed readTimeout"},
		{"sockets per client over all", func(c *Config) { c.WebSocket.MaxConnsPerClient = c.MaxConns + 1 }, "websocket.maxConnsPerClient: must be between 1 and maxConns (8192)"},
		{"sockets per principal over all", func(c *Config) { c.WebSocket.MaxConnsPerPrincipal = c.MaxConns + 1 }, "websocket.maxConnsPerPrincipal: must be between 1 and maxConns (8192)"},
		{"no sockets per principal", func(c *Config) { c.WebSocket.MaxConnsPerPrincipal = -1 }, "websocket.maxConnsPerPrincipal: must be between 1 and maxConns (8192)"},
		{"sockets per address over all", func(c *Config) { c.WebSocket.MaxConnsPerAddress = c.MaxConns + 1 }, "websocket.maxConnsPerAddress: must be between 1 and maxConns (8192)"},
		{"no sockets per address", func(c *Config) { c.WebSocket.MaxConnsPerAddress = -1 }, "websocket.maxConnsPerAddress: must be between 1 and maxConns (8192)"},
		{"no subscriptions", func(c *Config) { c.WebSocket.MaxSubscriptionsPerConn = -1 }, "websocket.maxSubscriptionsPerConn: must be between 1 and 100000"},
		{"message over the body budget", func(c *Config) { c.WebSocket.MaxMessageBytes = c.MaxBodyBytesInFlight + 1 }, "websocket.maxMessageBytes: must be between 1024 and maxBodyBytesInFlight (268435456)"},
		{"tiny message", func(c *Config) { c.WebSocket.MaxMessageBytes = 10 }, "websocket.maxMessageBytes: must be between 1024"},
		{"no queue", func(c *Config) { c.WebSocket.QueueSize = -1 }, "websocket.queueSize: must be between 1 and 1048576"},
		{"ping too often", func(c *Config) { c.WebSocket.PingInterval = time.Millisecond }, "websocket.pingInterval: must be at least 100ms"},
		{"write timeout negative", func(c *Config) { c.WebSocket.WriteTimeout = -time.Second }, "websocket.writeTimeout: must be at least 100ms"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			c.SetDefaults()
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
