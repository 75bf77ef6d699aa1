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
	Listen           string        `yaml:"listen"`
	MaxBodyBytes     int           `yaml:"maxBodyBytes"`
	MaxBatch         int           `yaml:"maxBatch"`
	BatchConcurrency int           `yaml:"batchConcurrency"`
	ReadTimeout      time.Duration `yaml:"readTimeout"`
	WriteTimeout     time.Duration `yaml:"writeTimeout"`
	IdleTimeout      time.Duration `yaml:"idleTimeout"`
	ShutdownTimeout  time.Duration `yaml:"shutdownTimeout"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.Listen, "127.0.0.1:8545")
	defaults.Set(&c.MaxBodyBytes, 5<<20)
	defaults.Set(&c.MaxBatch, 100)
	defaults.Set(&c.BatchConcurrency, 8)
	defaults.Set(&c.ReadTimeout, 30*time.Second)
	defaults.Set(&c.WriteTimeout, 30*time.Second)
	defaults.Set(&c.IdleTimeout, 120*time.Second)
	defaults.Set(&c.ShutdownTimeout, 10*time.Second)
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
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"readTimeout", c.ReadTimeout}, {"writeTimeout", c.WriteTimeout}, {"idleTimeout", c.IdleTimeout}, {"shutdownTimeout", c.ShutdownTimeout}} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be a positive duration", d.key))
		}
	}
	return errors.Join(errs...)
}

// AdminConfig is the `admin:` section: the listener of /metrics, /healthz and /readyz.
type AdminConfig struct {
	Listen string `yaml:"listen"`
}

// SetDefaults fills unset fields with their defaults.
func (c *AdminConfig) SetDefaults() { defaults.Set(&c.Listen, "127.0.0.1:9545") }

// Validate checks c.
func (c *AdminConfig) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("listen: %q is not host:port", c.Listen)
	}
	return nil
}
