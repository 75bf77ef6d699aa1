package ratelimit

import (
	"strconv"
	"time"

	"github.com/web3gate/web3gate/internal/redisx"
)

// The shared budgets are one Lua script of web3gate's own, run through redisx (rueidis,
// EVALSHA) rather than github.com/go-redis/redis_rate: that library's GCRA script drives
// go-redis, a second Redis client with its own pool beside rueidis, and would bypass redisx's
// timeouts, failure counting, circuit breaker and probe, which decide when a replica falls
// back to its local limiter. The script also charges two budgets (client id and principal)
// at once, both or neither, which redis_rate's one-key limiter cannot.

// gcraScript charges the budgets of KEYS at once, both or neither, with Redis's clock, in
// microseconds. ARGV holds three values per key: the interval (µs per unit), the tolerance
// (burst × interval, µs) and the cost (units, at most the burst). A key holds its TAT and
// expires once it is past (a full bucket). It returns {allowed (1/0), retry after (µs),
// remaining units, reset (µs), the index (from 1) of the key with the fewest units left}.
const gcraScript = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = #KEYS
local tats = {}
local ok, retry = 1, 0
for i = 1, n do
  local iv, tau, cost = tonumber(ARGV[3*i-2]), tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
  local tat = tonumber(redis.call('GET', KEYS[i]) or '0') or 0
  if tat < now then tat = now end
  tats[i] = tat
  local allow = tat + cost * iv - tau
  if allow > now then
    ok = 0
    if allow - now > retry then retry = allow - now end
  end
end
local best, rem, reset = 1, -1, 0
for i = 1, n do
  local iv, tau, cost = tonumber(ARGV[3*i-2]), tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
  local tat = tats[i]
  if ok == 1 and cost > 0 then
    tat = tat + cost * iv
    redis.call('SET', KEYS[i], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
  end
  local r = math.floor((now + tau - tat) / iv + 1e-9)
  if r < 0 then r = 0 end
  if rem < 0 or r < rem then best, rem, reset = i, r, tat - now end
end
return {ok, math.ceil(retry), rem, math.ceil(reset), best}
`

// shared charges cost to the budgets bs of keys in Redis; ok false when Redis did not answer
// within rateLimit.redisTimeout (or is marked down): the caller decides locally.
func (s *Stage) shared(keys []string, bs []*budget, cost uint64) (verdict, bool) {
	args := make([]string, 0, 3*len(bs))
	for _, b := range bs {
		iv := b.interval / 1e3 // µs
		args = append(args,
			strconv.FormatFloat(iv, 'g', -1, 64),
			strconv.FormatFloat(float64(b.burst)*iv, 'g', -1, 64),
			strconv.FormatUint(min(cost, b.burst), 10))
	}
	r, st := s.redis.RunScript(s.script, s.cfg.RedisTimeout, keys, args)
	if st != redisx.Hit || len(r) != 5 || r[4] < 1 || int(r[4]) > len(bs) {
		return verdict{}, false
	}
	b := bs[r[4]-1]
	v := verdict{ok: r[0] == 1, limit: b.burst, remaining: uint64(max(r[2], 0)), reset: time.Duration(max(r[3], 0)) * time.Microsecond}
	v.remaining = min(v.remaining, b.burst)
	if !v.ok {
		v.retryAfter = time.Duration(max(r[1], 1)) * time.Microsecond
	}
	return v, true
}
