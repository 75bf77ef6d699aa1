package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The admin listener's APIs (products, OAuth clients) take bearer tokens of their own, stored
// in the config as SHA-256 hashes with a name, and answer with the REST error object.

// AdminToken is one admin token in the config: the hex SHA-256 of the token, with a name the
// logs of its writes carry.
type AdminToken struct {
	Name   string `yaml:"name"`
	SHA256 string `yaml:"sha256"`
}

// CheckAdminTokens checks a list of admin tokens at key ("tokens"): each hash 64 hex
// digits, hashes and names unique, names 1 to 64 characters.
func CheckAdminTokens(key string, tokens []AdminToken) []error {
	var errs []error
	hashes, names := map[string]int{}, map[string]int{}
	for i, t := range tokens {
		h := strings.ToLower(t.SHA256)
		if b, err := hex.DecodeString(h); err != nil || len(b) != sha256.Size {
			errs = append(errs, fmt.Errorf("%s[%d].sha256: must be 64 hex digits (the SHA-256 of the token; web3gate auth hash-token makes it)", key, i))
		} else if j, dup := hashes[h]; dup {
			errs = append(errs, fmt.Errorf("%s[%d].sha256: duplicate of %s[%d]", key, i, key, j))
		} else {
			hashes[h] = i
		}
		switch j, dup := names[t.Name]; {
		case strings.TrimSpace(t.Name) == "" || len(t.Name) > 64:
			errs = append(errs, fmt.Errorf("%s[%d].name: must be 1 to 64 characters", key, i))
		case dup:
			errs = append(errs, fmt.Errorf("%s[%d].name: duplicate of %s[%d]", key, i, key, j))
		default:
			names[t.Name] = i
		}
	}
	return errs
}

// AdminTokens are the validated admin tokens of one admin API.
type AdminTokens struct {
	tokens []adminHash
}

type adminHash struct {
	name string
	hash [sha256.Size]byte
}

// NewAdminTokens parses tokens; key is their config path ("products.admin.tokens"), for the
// messages.
func NewAdminTokens(key string, tokens []AdminToken) (AdminTokens, error) {
	var a AdminTokens
	for i, t := range tokens {
		b, err := hex.DecodeString(strings.ToLower(t.SHA256))
		if err != nil || len(b) != sha256.Size {
			return AdminTokens{}, fmt.Errorf("%s[%d].sha256: must be 64 hex digits", key, i)
		}
		h := adminHash{name: t.Name}
		copy(h.hash[:], b)
		a.tokens = append(a.tokens, h)
	}
	return a, nil
}

// Empty reports whether no token is configured (the API is off).
func (a AdminTokens) Empty() bool { return len(a.tokens) == 0 }

// Authenticate checks r's bearer token against every hash, in constant time and without
// stopping at a match, so that the time taken tells nothing about the tokens, and returns
// the token's name. A refusal is a 401 *HTTPError, with WWW-Authenticate set on w.
func (a AdminTokens) Authenticate(w http.ResponseWriter, r *http.Request) (string, error) {
	unauthorized := func(msg string) error {
		w.Header().Set("WWW-Authenticate", `Bearer realm="web3gate-admin"`)
		return Errorf(http.StatusUnauthorized, "%s", msg)
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", unauthorized("Not Authorized: an admin bearer token is required (Authorization: Bearer <token>)")
	}
	scheme, tok, ok := strings.Cut(h, " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return "", unauthorized("Not Authorized: the Authorization header must be Bearer <token>")
	}
	sum := sha256.Sum256([]byte(tok))
	match := -1
	for i := range a.tokens {
		if subtle.ConstantTimeCompare(sum[:], a.tokens[i].hash[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return "", unauthorized("Not Authorized: invalid admin token")
	}
	return a.tokens[match].name, nil
}

// WriteHTTPError writes the REST error object of he to a net/http response.
func WriteHTTPError(w http.ResponseWriter, reqID string, he *HTTPError) {
	body, _ := json.Marshal(struct {
		Error RESTError `json:"error"`
	}{RESTError{Code: he.Status, Status: http.StatusText(he.Status), Request: reqID, Message: he.Message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(he.Status)
	_, _ = w.Write(body)
}
