package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// SignatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256>" (Stripe's form): the
	// HMAC, keyed with the endpoint's secret (the whole string, "whsec_" included), of
	// "<t>.<body>".
	SignatureHeader = "Web3gate-Signature"
	// EventIDHeader is the event's id, evt_<seq>: the same in every attempt, the key a
	// receiver deduplicates by.
	EventIDHeader = "Web3gate-Event-Id"
)

// Sign is the SignatureHeader value of body sent at t with secret.
func Sign(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Errors of Verify.
var (
	ErrBadSignatureHeader = errors.New("malformed " + SignatureHeader + " header")
	ErrSignatureMismatch  = errors.New("signature does not match")
	ErrSignatureExpired   = errors.New("signature timestamp outside the tolerance")
)

// Verify checks a SignatureHeader value against body and secret, as a receiver does: some
// v1 signature must match (several are allowed, for a secret rotation), and t must be within
// tolerance of now (a replayed old delivery is refused; 0 skips that check).
func Verify(secret, header string, body []byte, tolerance time.Duration, now time.Time) error {
	var (
		ts   string
		sigs [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadSignatureHeader
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			b, err := hex.DecodeString(v)
			if err != nil {
				return ErrBadSignatureHeader
			}
			sigs = append(sigs, b)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignatureHeader
	}
	want := mac(secret, ts, body)
	match := false
	for _, s := range sigs {
		match = hmac.Equal(s, want) || match
	}
	if !match {
		return ErrSignatureMismatch
	}
	if d := now.Sub(time.Unix(unix, 0)); tolerance > 0 && (d > tolerance || d < -tolerance) {
		return fmt.Errorf("%w: signed %s ago", ErrSignatureExpired, d.Round(time.Second))
	}
	return nil
}
