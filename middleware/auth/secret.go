package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/crypto/argon2"
)

// ClientIDPrefix starts every client id NewClientSecret makes, so that an id is recognisable
// in a config file or a log line (and a secret scanner can tell it from the secret).
const ClientIDPrefix = "w3g_"

// The argon2id parameters of new hashes: OWASP's first recommendation (19 MiB, 2 passes, one
// lane). A hash holds its 19 MiB for tens of milliseconds (docs/performance.md, "Notes from
// the code", middleware/auth), so the token endpoint bounds how many run at once. Hashes made
// with other parameters keep verifying: the parameters travel in the encoded string.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// Bounds on the parameters VerifySecret accepts from an encoded hash, so a corrupt or hostile
// row cannot make one verification take gigabytes or minutes.
const (
	maxArgonTime    = 16
	maxArgonMemory  = 256 * 1024 // KiB
	maxArgonThreads = 16
)

// NewClientSecret returns a new client id ("w3g_" and 128 random bits) and secret (256 random
// bits), both base64url without padding, so they survive URLs, forms and HTTP Basic unchanged.
func NewClientSecret() (id, secret string, err error) {
	var b [16 + 32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", "", fmt.Errorf("client secret: %w", err)
	}
	return ClientIDPrefix + base64.RawURLEncoding.EncodeToString(b[:16]), base64.RawURLEncoding.EncodeToString(b[16:]), nil
}

// HashSecret hashes secret with argon2id and a random salt, in the PHC string format that
// libargon2 and most libraries read: $argon2id$v=19$m=19456,t=2,p=1$<salt>$<hash>.
func HashSecret(secret string) (string, error) {
	if secret == "" {
		return "", errors.New("hash secret: the secret is empty")
	}
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("hash secret: %w", err)
	}
	p := argonParams{time: argonTime, memory: argonMemory, threads: argonThreads}
	key := argon2.IDKey([]byte(secret), salt, p.time, p.memory, p.threads, argonKeyLen)
	return p.encode(salt, key), nil
}

// decoyHash returns a hash in HashSecret's format, with its parameters, whose salt and key are
// random: verifying a secret against it costs what verifying against a stored hash costs, and
// fails, since no secret is known to derive the random key. The token endpoint verifies
// against it when the client id is unknown. Making it runs no argon2: one hash at start would
// take 19 MiB of heap that the idle process then holds until the Go scavenger returns it
// (docs/performance.md, "Footprint").
func decoyHash() (string, error) {
	var b [argonSaltLen + argonKeyLen]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("decoy hash: %w", err)
	}
	p := argonParams{time: argonTime, memory: argonMemory, threads: argonThreads}
	return p.encode(b[:argonSaltLen], b[argonSaltLen:]), nil
}

// VerifySecret reports whether secret matches encoded, a hash made by HashSecret. The hashes
// are compared in constant time; a malformed encoding is false.
func VerifySecret(encoded, secret string) bool {
	p, salt, want, err := decodeArgon2id(encoded)
	if err != nil {
		return false
	}
	got := argon2.IDKey([]byte(secret), salt, p.time, p.memory, p.threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1
}

type argonParams struct {
	time, memory uint32
	threads      uint8
}

// encode is the PHC string; PHC uses the standard base64 alphabet without padding.
func (p argonParams) encode(salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key))
}

// decodeArgon2id parses a PHC argon2id string and bounds its parameters.
func decodeArgon2id(encoded string) (p argonParams, salt, key []byte, err error) {
	parts := strings.Split(encoded, "$")
	// "", "argon2id", "v=19", "m=..,t=..,p=..", salt, hash
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errors.New("not an argon2id hash")
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, fmt.Errorf("argon2 version %q is not supported", parts[2])
	}
	var seen [3]bool
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, perr := strconv.ParseUint(v, 10, 32)
		if !ok || perr != nil {
			return p, nil, nil, fmt.Errorf("argon2 parameter %q is malformed", kv)
		}
		switch k {
		case "m":
			p.memory, seen[0] = uint32(n), true
		case "t":
			p.time, seen[1] = uint32(n), true
		case "p":
			if n > 255 {
				return p, nil, nil, errors.New("argon2 parallelism out of range")
			}
			p.threads, seen[2] = uint8(n), true
		default:
			return p, nil, nil, fmt.Errorf("argon2 parameter %q is unknown", k)
		}
	}
	switch {
	case !seen[0] || !seen[1] || !seen[2]:
		return p, nil, nil, errors.New("argon2 parameters m, t and p are required")
	case p.time < 1 || p.time > maxArgonTime, p.threads < 1 || p.threads > maxArgonThreads,
		p.memory < 8*uint32(p.threads) || p.memory > maxArgonMemory:
		return p, nil, nil, errors.New("argon2 parameters out of range")
	}
	if salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil || len(salt) < 8 {
		return p, nil, nil, errors.New("argon2 salt is malformed")
	}
	if key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(key) < 16 || len(key) > 64 {
		return p, nil, nil, errors.New("argon2 hash is malformed")
	}
	return p, salt, key, nil
}
