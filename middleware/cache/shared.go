package cache

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/web3gate/web3gate/internal/redisx"
)

// The shared level (Redis). An entry is written by the replica that fetched it, with the
// same rules and TTL as its local entry, and read by any replica after a local miss; a hit
// fills the reader's local level for what is left of the TTL.
//
// Key:   <redis.keyPrefix>rc:<local key>, the local key being <chain id>:<method>:<canonical
//        params>, followed for an entry true at one head only by @<head number>:<head hash>
//        (a replica that sees another head never reads it); or, for a local key longer than
//        maxKeyParams bytes past the method, rc:<chain id>:<method>:#<SHA-256 of the local key, hex>.
// Value: a version byte (1), the expiry as Unix milliseconds (8 bytes, big-endian; 0: none,
//        the local level keeps it until evicted and Redis for redis.maxTtl), the result.

const (
	entryVersion = 1
	entryHeader  = 9
	maxKeyParams = 256
)

// redisKey is the Redis key of the entry whose local key is key.
func (s *Stage) redisKey(key string, chain uint64, method string) string {
	prefix := s.redis.KeyPrefix()
	b := make([]byte, 0, len(prefix)+3+20+2+len(method)+min(len(key), maxKeyParams+1))
	b = append(b, prefix...)
	b = append(b, "rc:"...)
	b = strconv.AppendUint(b, chain, 10)
	b = append(b, ':')
	b = append(b, method...)
	b = append(b, ':')
	if rest := len(key) - (len(b) - len(prefix) - 3); rest > maxKeyParams {
		sum := sha256.Sum256([]byte(key))
		b = append(b, '#')
		b = hex.AppendEncode(b, sum[:])
		return string(b)
	}
	return prefix + "rc:" + key
}

// sharedGet looks the entry up in Redis: the result and the TTL left (0: none).
func (s *Stage) sharedGet(key string, chain uint64, method, label string) ([]byte, time.Duration, bool) {
	v, st := s.redis.Get(s.redisKey(key, chain, method))
	if st != redisx.Hit {
		s.redisLookups.WithLabelValues(label, st.String()).Inc()
		return nil, 0, false
	}
	result, ttl, err := decodeEntry(v, s.cfg.MaxEntryBytes, time.Now())
	if err != nil {
		s.redisLookups.WithLabelValues(label, err.Error()).Inc()
		return nil, 0, false
	}
	s.redisLookups.WithLabelValues(label, "hit").Inc()
	return result, ttl, true
}

// sharedSet writes the entry to Redis in the background.
func (s *Stage) sharedSet(key string, chain uint64, method string, result []byte, ttl time.Duration) {
	s.redis.Set(s.redisKey(key, chain, method), encodeEntry(result, ttl, time.Now()), ttl)
}

func encodeEntry(result []byte, ttl time.Duration, now time.Time) []byte {
	v := make([]byte, entryHeader, entryHeader+len(result))
	v[0] = entryVersion
	if ttl > 0 {
		binary.BigEndian.PutUint64(v[1:entryHeader], uint64(now.Add(ttl).UnixMilli()))
	}
	return append(v, result...)
}

// The reasons decodeEntry refuses a value; their text is the metrics label.
var (
	errInvalid = errors.New("invalid") // another version or form, an empty or oversized result
	errExpired = errors.New("miss")    // past its expiry (Redis had not removed it yet)
)

// decodeEntry returns the result of an entry and the TTL it has left (0: none).
func decodeEntry(v []byte, maxResult int64, now time.Time) (result []byte, ttl time.Duration, err error) {
	if len(v) <= entryHeader || v[0] != entryVersion || int64(len(v)-entryHeader) > maxResult {
		return nil, 0, errInvalid
	}
	if exp := binary.BigEndian.Uint64(v[1:entryHeader]); exp != 0 {
		if ttl = time.UnixMilli(int64(exp)).Sub(now); ttl <= 0 {
			return nil, 0, errExpired
		}
	}
	return v[entryHeader:], ttl, nil
}
