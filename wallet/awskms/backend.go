// Package awskms keeps account keys in AWS KMS: secp256k1 keys (KeySpec ECC_SECG_P256K1)
// generated inside KMS, never extractable, and used through kms:Sign on the 32-byte digest.
// It implements wallet.KeyBackend and wallet.Signer; web3gate keeps only each key's ARN.
//
// Credentials come from the AWS SDK's standard chain, never from web3gate's configuration.
// The IAM principal needs kms:CreateKey, kms:GetPublicKey and kms:TagResource (to generate;
// kms:CreateAlias too with keyAliasPrefix) and kms:GetPublicKey and kms:Sign (to sign).
//
// Signatures come back as DER (der.go); they are turned into Ethereum's [R || S || V] by
// wallet.SignatureFromRS, which checks that they recover to the account.
package awskms

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/kms"
	"github.com/ethereum/go-ethereum/common"
	"go.uber.org/zap"

	"github.com/web3gate/web3gate/wallet"
)

// retryMaxBackoff caps the SDK's wait between two attempts: the attempts must fit in
// signTimeout (the SDK's default, 20s, would not).
const retryMaxBackoff = 250 * time.Millisecond

// Backend is the AWS KMS key backend: a wallet.KeyBackend. Its methods are safe for
// concurrent use.
type Backend struct {
	cfg    Config
	client *kms.Client
	conns  *connSet
	log    *zap.Logger
	sem    chan struct{} // one token per kms:Sign in flight

	mu      sync.Mutex
	signers map[string]*Signer // by the ref Open was given
	closed  bool
}

var _ wallet.KeyBackend = (*Backend)(nil)

// New makes the backend of cfg (defaults set, validated): the SDK's configuration from the
// standard chain, with cfg's region and endpoint when set. It fails when the chain gives no
// region or no credentials (it retrieves them once, within ctx), and does not call KMS.
// log may be nil.
func New(ctx context.Context, cfg Config, log *zap.Logger) (*Backend, error) {
	if log == nil {
		log = zap.NewNop()
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("awskms: configuration: %w", err)
	}
	if cfg.SignTimeout <= 0 || cfg.MaxConcurrentSigns < 1 || cfg.MaxAttempts < 1 {
		return nil, errors.New("awskms: configuration: defaults not set (call Config.SetDefaults)")
	}
	conns := newConnSet()
	// The SDK's client and defaults (dial and TLS timeouts, no redirects), with one kept-alive
	// connection per signing slot and its connections tracked for Close.
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		tr.MaxIdleConnsPerHost = cfg.MaxConcurrentSigns
		dial := tr.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		tr.DialContext = conns.wrap(dial)
	})
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(httpClient),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = retryMaxBackoff
				// No client-side retry quota: a KMS down for a while would otherwise turn
				// every later error into "retry quota exceeded", hiding the real one.
				o.RateLimiter = ratelimit.None
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("awskms: load the AWS configuration from the standard chain: %w", err)
	}
	if awsCfg.Region == "" {
		return nil, errors.New("awskms: region: not set, and the standard chain (AWS_REGION, the profile's region) gives none")
	}
	if _, err := awsCfg.Credentials.Retrieve(ctx); err != nil {
		return nil, fmt.Errorf("awskms: no AWS credentials from the standard chain (environment, shared files, web identity, instance role): %w", err)
	}
	client := kms.NewFromConfig(awsCfg, func(o *kms.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	log.Info("AWS KMS key backend ready", zap.String("region", awsCfg.Region),
		zap.String("endpoint", endpointName(cfg.Endpoint)), zap.Duration("signTimeout", cfg.SignTimeout),
		zap.Int("maxConcurrentSigns", cfg.MaxConcurrentSigns))
	return &Backend{
		cfg:     cfg,
		client:  client,
		conns:   conns,
		log:     log,
		sem:     make(chan struct{}, cfg.MaxConcurrentSigns),
		signers: map[string]*Signer{},
	}, nil
}

func endpointName(e string) string {
	if e == "" {
		return "(the region's)"
	}
	return e
}

// Name is wallet.BackendAWSKMS.
func (b *Backend) Name() string { return wallet.BackendAWSKMS }

// Import answers wallet.ErrImportUnsupported: keys are generated inside KMS. (KMS can take
// external ECC_SECG_P256K1 key material, wrapped with GetParametersForImport's RSA key, but
// local-kms, which the tests run, takes only symmetric material: an import path would ship
// untested.)
func (b *Backend) Import(context.Context, *ecdsa.PrivateKey, string) (wallet.KeyRef, error) {
	return wallet.KeyRef{}, fmt.Errorf("awskms: %w", wallet.ErrImportUnsupported)
}

// Open returns the signer of the KMS key ref (a key id, key ARN, alias name or alias ARN)
// after checking, with kms:GetPublicKey, that it is an ECC_SECG_P256K1 SIGN_VERIFY key whose
// public key is addr's. Signers are cached by ref: a second Open asks KMS nothing.
func (b *Backend) Open(ctx context.Context, ref string, addr common.Address) (wallet.Signer, error) {
	if ref == "" {
		return nil, errors.New("awskms: open: empty key reference")
	}
	b.mu.Lock()
	closed, s := b.closed, b.signers[ref]
	b.mu.Unlock()
	if closed {
		return nil, errClosed
	}
	if s != nil {
		if s.addr != addr {
			return nil, fmt.Errorf("awskms: key %s is the key of %s, not of %s", ref, s.addr.Hex(), addr.Hex())
		}
		return s, nil
	}
	keyARN, got, err := b.publicKey(ctx, ref)
	if err != nil {
		return nil, err
	}
	if got != addr {
		return nil, fmt.Errorf("awskms: key %s is the key of %s, not of %s", ref, got.Hex(), addr.Hex())
	}
	s = &Signer{b: b, keyID: keyARN, addr: addr}
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev := b.signers[ref]; prev != nil {
		return prev, nil
	}
	b.signers[ref] = s
	return s, nil
}

// Close drops the cached signers and closes the connections to KMS (a call in flight fails);
// signers opened before fail from then on.
func (b *Backend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.signers = map[string]*Signer{}
	b.mu.Unlock()
	b.conns.closeAll()
	return nil
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

var errClosed = errors.New("awskms: the backend is closed")
