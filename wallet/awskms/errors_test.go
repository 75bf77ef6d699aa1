package awskms

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/web3gate/web3gate/wallet"
)

// The answers local-kms cannot be made to give (throttling, KMS's own failures, a bare 5xx
// from a load balancer) are classified as the SDK reports them.
func TestClassify(t *testing.T) {
	status := func(code int) error {
		return &awshttp.ResponseError{ResponseError: &smithyhttp.ResponseError{
			Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
			Err:      errors.New("upstream said no"),
		}}
	}
	api := func(code string) error { return &smithy.GenericAPIError{Code: code, Message: "m"} }
	for _, tc := range []struct {
		err         error
		unavailable bool
		refused     bool
		says        string
	}{
		{api("ThrottlingException"), true, false, "KMS answered ThrottlingException"},
		{api("KMSInternalException"), true, false, "KMSInternalException"},
		{api("DependencyTimeoutException"), true, false, "DependencyTimeoutException"},
		{status(503), true, false, "HTTP 503"},
		{status(429), true, false, "HTTP 429"},
		{status(400), true, false, ""}, // no API code: not an answer KMS understood to give
		{&smithyhttp.RequestSendError{Err: errors.New("dial tcp: connection refused")}, true, false, "unreachable"},
		{context.DeadlineExceeded, true, false, "within signTimeout 5s"},
		{api("NotFoundException"), false, true, "does not exist"},
		{api("DisabledException"), false, true, "disabled"},
		{api("KMSInvalidStateException"), false, true, "pending deletion"},
		{api("AccessDeniedException"), false, true, "access denied"},
		{api("UnrecognizedClientException"), false, true, "credentials"},
		{api("ValidationException"), false, false, "KMS answered ValidationException"},
	} {
		err := classify(context.Background(), "sign with", "key-1", 5*time.Second, tc.err)
		if errors.Is(err, wallet.ErrSignerUnavailable) != tc.unavailable || errors.Is(err, ErrKeyRefused) != tc.refused ||
			!strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "key key-1") {
			t.Errorf("%v: classified as %v", tc.err, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := classify(ctx, "sign with", "k", time.Second, context.Canceled); !errors.Is(err, wallet.ErrSignerUnavailable) ||
		!strings.Contains(err.Error(), "the request ended (context canceled)") {
		t.Errorf("caller's cancellation: %v", err)
	}
}
