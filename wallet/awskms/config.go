package awskms

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"time"

	"github.com/web3gate/web3gate/internal/defaults"
)

// Defaults of Config.
const (
	DefaultSignTimeout        = 5 * time.Second
	DefaultMaxConcurrentSigns = 64
	DefaultMaxAttempts        = 2
)

// Config is the AWS KMS key backend's section of the configuration. It holds no secret:
// credentials come from the AWS SDK's standard chain only (the environment's
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, the shared config and
// credentials files and AWS_PROFILE, web identity, SSO, the ECS or EC2 instance role).
type Config struct {
	// Enabled turns the backend on: accounts whose keys live in AWS KMS can be created and
	// signed with. Off by default; nothing below is used while it is off.
	Enabled bool `yaml:"enabled"`
	// Region is the AWS region of the keys, e.g. "eu-west-1". Empty: the standard chain's
	// (AWS_REGION, AWS_DEFAULT_REGION, the profile's region); one of the two must give it.
	Region string `yaml:"region"`
	// Endpoint overrides the KMS endpoint URL, for a VPC endpoint or a local KMS
	// implementation (e.g. "http://127.0.0.1:8080"). Empty: the region's public endpoint.
	Endpoint string `yaml:"endpoint"`
	// SignTimeout bounds one signature, retries and the wait for a free slot included: past
	// it the request fails with a signer-unavailable error. Default 5s.
	SignTimeout time.Duration `yaml:"signTimeout"`
	// MaxConcurrentSigns bounds the kms:Sign calls in flight from this process (KMS's request
	// quota for ECC_SECG_P256K1 signing is per account and region, shared by every replica);
	// further signatures wait for a slot within SignTimeout. Default 64.
	MaxConcurrentSigns int `yaml:"maxConcurrentSigns"`
	// MaxAttempts is the AWS SDK's attempts per KMS call (1: no retry) on throttling, 5xx
	// and network errors, all within SignTimeout. Default 2: a KMS that is down fails fast.
	MaxAttempts int `yaml:"maxAttempts"`
	// KeyAliasPrefix, when set, gives each generated key the alias
	// "alias/<keyAliasPrefix><address>" (address in lower-case hex with 0x), for operators
	// browsing the keys. Letters, digits, "/", "_" and "-"; must not start with "aws/".
	KeyAliasPrefix string `yaml:"keyAliasPrefix"`
	// Tags are set on each generated key (e.g. {team: payments}), beside the tag
	// "web3gate:label" holding the account's label when it has one.
	Tags map[string]string `yaml:"tags"`
}

// SetDefaults fills unset fields with their defaults.
func (c *Config) SetDefaults() {
	defaults.Set(&c.SignTimeout, DefaultSignTimeout)
	defaults.Set(&c.MaxConcurrentSigns, DefaultMaxConcurrentSigns)
	defaults.Set(&c.MaxAttempts, DefaultMaxAttempts)
}

var aliasPrefixRE = regexp.MustCompile(`^[a-zA-Z0-9/_-]*$`)

// Validate checks c; each message names its key within the section. A disabled backend is
// not checked.
func (c *Config) Validate() error {
	if !c.Enabled {
		return nil
	}
	var errs []error
	if c.Endpoint != "" {
		u, err := url.Parse(c.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("endpoint: must be an http:// or https:// URL with a host, got %q", c.Endpoint))
		}
	}
	if c.SignTimeout <= 0 {
		errs = append(errs, fmt.Errorf("signTimeout: must be positive, got %s", c.SignTimeout))
	}
	if c.MaxConcurrentSigns < 1 {
		errs = append(errs, fmt.Errorf("maxConcurrentSigns: must be at least 1, got %d", c.MaxConcurrentSigns))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 10 {
		errs = append(errs, fmt.Errorf("maxAttempts: must be 1 to 10, got %d", c.MaxAttempts))
	}
	if !aliasPrefixRE.MatchString(c.KeyAliasPrefix) || len(c.KeyAliasPrefix) > 200 {
		errs = append(errs, fmt.Errorf("keyAliasPrefix: letters, digits, /, _ and - only, at most 200, got %q", c.KeyAliasPrefix))
	} else if len(c.KeyAliasPrefix) >= 4 && c.KeyAliasPrefix[:4] == "aws/" {
		errs = append(errs, errors.New("keyAliasPrefix: must not start with aws/ (reserved for AWS's own keys)"))
	}
	for k, v := range c.Tags {
		if k == "" || len(k) > 128 || len(v) > 256 {
			errs = append(errs, fmt.Errorf("tags: key %q: keys 1 to 128 characters, values at most 256", k))
		}
		if k == labelTag {
			errs = append(errs, fmt.Errorf("tags: %q is set by web3gate itself", labelTag))
		}
	}
	return errors.Join(errs...)
}
