package tracing

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	c := Config{Enabled: true}
	c.SetDefaults()
	return c
}

func TestDefaultsValidate(t *testing.T) {
	c := validConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Endpoint != DefaultEndpoint || *c.SampleRatio != 1 || !*c.TrustIncoming || c.ServiceName != "web3gate" || c.Timeout != 10*time.Second {
		t.Fatalf("defaults: %+v", c)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	ratio := func(f float64) *float64 { return &f }
	for _, tc := range []struct {
		name   string
		change func(c *Config)
		want   string
	}{
		{"no scheme", func(c *Config) { c.Endpoint = "127.0.0.1:4318" }, "endpoint: must be an http:// or https:// URL"},
		{"userinfo", func(c *Config) { c.Endpoint = "https://user:pw@collector:4318" }, "endpoint: must not carry credentials"},
		{"query", func(c *Config) { c.Endpoint = "https://collector:4318/v1/traces?key=1" }, "endpoint: must not have a query"},
		{"grpc", func(c *Config) { c.Protocol = "grpc" }, "protocol: grpc is not offered"},
		{"protocol", func(c *Config) { c.Protocol = "http/json" }, `protocol: "http/json" is not http/protobuf`},
		{"ratio", func(c *Config) { c.SampleRatio = ratio(1.5) }, "sampleRatio: must be between 0 and 1"},
		{"service", func(c *Config) { c.ServiceName = strings.Repeat("s", 256) }, "serviceName: must have 1 to 255"},
		{"header name", func(c *Config) { c.Headers = map[string]Secret{"Bad Name": "x"} }, `headers: "Bad Name" is not a valid HTTP header name`},
		{"compression", func(c *Config) { c.Compression = "zstd" }, `compression: "zstd" is not none or gzip`},
		{"timeout", func(c *Config) { c.Timeout = time.Hour }, "timeout: must be between 1ms and 5m"},
		{"queue", func(c *Config) { c.QueueSize = -1 }, "queueSize: must be between 1 and 1000000"},
		{"batch", func(c *Config) { c.BatchSize = c.QueueSize + 1 }, "batchSize: must be between 1 and queueSize"},
		{"interval", func(c *Config) { c.Interval = time.Millisecond }, "interval: must be between 10ms and 1h"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

// A header's value is a secret: neither a validation message nor a formatted config shows it.
func TestHeaderValueNeverShown(t *testing.T) {
	const secret = "Bearer s3cr3t-token"
	c := validConfig()
	c.Headers = map[string]Secret{"Authorization": secret + "\r\nX-Injected: 1"}
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "headers.Authorization: the value holds a control character") {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("the error shows the secret: %v", err)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, c); strings.Contains(out, "s3cr3t") {
			t.Fatalf("%s shows the secret: %s", f, out)
		}
	}
}

func TestExportURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:4318":              "http://127.0.0.1:4318/v1/traces",
		"http://127.0.0.1:4318/":             "http://127.0.0.1:4318/v1/traces",
		"https://otlp.example/api/traces":    "https://otlp.example/api/traces",
		"https://otlp.example:443/v1/traces": "https://otlp.example:443/v1/traces",
	} {
		got, err := ExportURL(in)
		if err != nil || got != want {
			t.Errorf("ExportURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
