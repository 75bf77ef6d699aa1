package metadata

import (
	"encoding/binary"
	"time"

	"github.com/web3gate/web3gate/internal/redisx"
)

// The shared level (Redis) between memory and the store: a record read from the store or
// fetched anew is written to Redis, and a replica whose memory misses reads Redis before the
// store. Negative answers (404s) stay in memory only.
//
// Key:   <redis.keyPrefix>md:<item key> (item.key: "<chain>/<address hex>[/<id hex>]").
// Value: a version byte (1), when the record was fetched (Unix nanoseconds, 8 bytes,
//        big-endian), its document failures in a row (4 bytes), the Token or Contract JSON.
// Redis keeps it for redis.maxTtl; the record's own age rules (maxAge, the failure
// back-off) apply to it as to a record from the store.

const (
	recordVersion = 1
	recordHeader  = 13
)

func (s *Service) redisKey(key string) string { return s.redis.KeyPrefix() + "md:" + key }

// sharedGet returns the record of it from Redis, or nil.
func (s *Service) sharedGet(it item, key string) *entry {
	v, st := s.redis.Get(s.redisKey(key))
	if st != redisx.Hit {
		s.metrics.redisLookup(it.kind(), st.String())
		return nil
	}
	body, updated, failures, ok := decodeRecord(v, s.cfg.CacheBytes)
	if !ok {
		s.metrics.redisLookup(it.kind(), "invalid")
		return nil
	}
	s.metrics.redisLookup(it.kind(), "hit")
	return newEntry(it, body, updated, failures)
}

// sharedSet writes e, the record of it, to Redis in the background.
func (s *Service) sharedSet(it item, key string, e *entry) {
	s.redis.Set(s.redisKey(key), encodeRecord(e), 0)
}

func encodeRecord(e *entry) []byte {
	v := make([]byte, recordHeader, recordHeader+len(e.body))
	v[0] = recordVersion
	binary.BigEndian.PutUint64(v[1:9], uint64(e.updated.UnixNano()))
	binary.BigEndian.PutUint32(v[9:13], uint32(e.failures))
	return append(v, e.body...)
}

// decodeRecord reads a record; not ok for a value of another version or form, or a body
// that is not a JSON object of at most maxBody bytes.
func decodeRecord(v []byte, maxBody int64) (body []byte, updated time.Time, failures int, ok bool) {
	if len(v) < recordHeader+2 || v[0] != recordVersion || int64(len(v)-recordHeader) > maxBody ||
		v[recordHeader] != '{' || v[len(v)-1] != '}' {
		return nil, time.Time{}, 0, false
	}
	updated = time.Unix(0, int64(binary.BigEndian.Uint64(v[1:9])))
	f := binary.BigEndian.Uint32(v[9:13])
	if f > 1<<20 {
		return nil, time.Time{}, 0, false
	}
	return v[recordHeader:], updated, int(f), true
}
