package auth

import (
	"fmt"
	"slices"
	"strings"
)

// ScopeSign is the scope an access token needs for the methods that sign
// (jsonrpc.IsSigningMethod): eth_sendTransaction, eth_signTransaction, personal_sign, ...
const ScopeSign = "eth_sign"

// AllScopes are the scopes web3gate knows, in a new slice. Static tokens from the config
// carry all of them; an OAuth client may be granted any of them.
func AllScopes() []string { return []string{ScopeSign} }

// HasScope reports whether scopes holds scope.
func HasScope(scopes []string, scope string) bool { return slices.Contains(scopes, scope) }

// validScopeToken reports whether s is a scope-token of RFC 6749 §3.3: one or more of
// %x21 / %x23-5B / %x5D-7E (printable ASCII without space, '"' and '\').
func validScopeToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// parseScope splits a scope parameter (space-separated scope-tokens) and drops duplicates,
// keeping the first occurrence's order. It returns an error for a malformed token.
func parseScope(param string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(param, " ") {
		if s == "" {
			continue // tolerate doubled or trailing spaces
		}
		if !validScopeToken(s) {
			return nil, fmt.Errorf("scope '%s' is malformed", s)
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out, nil
}
