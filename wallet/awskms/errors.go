package awskms

// What a failed KMS call means for the caller: try again later (wallet.ErrSignerUnavailable),
// or not (ErrKeyRefused, and any other API error).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/web3gate/web3gate/wallet"
)

// ErrKeyRefused is wrapped by the errors of a key that KMS will not use as asked: not found,
// disabled, pending deletion or import, of the wrong usage, or not allowed to this principal
// (access denied, credentials rejected). An operator must act; retrying will not help.
var ErrKeyRefused = errors.New("AWS KMS refused the key")

// API error codes meaning "not now": KMS is throttling or failing internally.
var unavailableCodes = map[string]bool{
	"ThrottlingException":         true,
	"KMSInternalException":        true,
	"DependencyTimeoutException":  true,
	"KeyUnavailableException":     true, // a custom key store's backing HSM is unreachable
	"ServiceUnavailable":          true,
	"ServiceUnavailableException": true,
	"RequestTimeout":              true,
	"RequestTimeoutException":     true,
}

// API error codes meaning "this key, for this principal, no".
var refusedCodes = map[string]string{
	"NotFoundException":           "the key does not exist in this account and region",
	"DisabledException":           "the key is disabled",
	"KMSInvalidStateException":    "the key is not usable in its state (pending deletion or import?)",
	"InvalidKeyUsageException":    "the key's usage or spec does not allow this",
	"AccessDeniedException":       "access denied to this principal (IAM or key policy)",
	"UnrecognizedClientException": "the credentials are not recognised",
	"InvalidSignatureException":   "the request signature was rejected (wrong secret key?)",
	"ExpiredTokenException":       "the credentials have expired",
	"IncorrectKeyException":       "wrong key",
	"InvalidArnException":         "the key reference is not a valid ARN",
}

// classify wraps err, from the KMS call op (e.g. "sign with") on key, for the caller. parent
// is the caller's context (to tell its cancellation from timeout, signTimeout).
func classify(parent context.Context, op, key string, timeout time.Duration, err error) error {
	what := "awskms: " + op
	if key != "" {
		what += " key " + key
	}
	var apiErr smithy.APIError
	isAPI := errors.As(err, &apiErr)
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		return fmt.Errorf("%s: %w: %s: %v", what, wallet.ErrSignerUnavailable, ctxReason(parent, timeout), err)
	case isAPI && unavailableCodes[apiErr.ErrorCode()]:
		return fmt.Errorf("%s: %w: KMS answered %s: %v", what, wallet.ErrSignerUnavailable, apiErr.ErrorCode(), err)
	case isAPI && refusedCodes[apiErr.ErrorCode()] != "":
		return fmt.Errorf("%s: %w: %s (%s): %v", what, ErrKeyRefused, refusedCodes[apiErr.ErrorCode()], apiErr.ErrorCode(), err)
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		if code := respErr.HTTPStatusCode(); code >= 500 || code == 429 {
			return fmt.Errorf("%s: %w: KMS answered HTTP %d: %v", what, wallet.ErrSignerUnavailable, code, err)
		}
	}
	if isAPI {
		return fmt.Errorf("%s: KMS answered %s: %w", what, apiErr.ErrorCode(), err)
	}
	// Not an answer of KMS: the request did not go through (refused, reset, DNS, TLS), or the
	// credentials could not be had from the chain now (an instance role's endpoint).
	var sendErr *smithyhttp.RequestSendError
	var netErr net.Error
	if errors.As(err, &sendErr) || errors.As(err, &netErr) {
		return fmt.Errorf("%s: %w: KMS unreachable: %v", what, wallet.ErrSignerUnavailable, err)
	}
	return fmt.Errorf("%s: %w: %v", what, wallet.ErrSignerUnavailable, err)
}

// ctxReason says why a call bounded by parent and timeout ended early.
func ctxReason(parent context.Context, timeout time.Duration) string {
	if parent.Err() != nil {
		return "the request ended (" + parent.Err().Error() + ")"
	}
	return fmt.Sprintf("no answer from KMS within signTimeout %s", timeout)
}
