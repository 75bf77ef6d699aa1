package redisx

import (
	"context"
	"time"

	"github.com/redis/rueidis"
)

// Script is a Lua script that RunScript runs atomically in Redis (EVALSHA, and EVAL once
// when Redis does not hold it yet).
type Script struct{ lua *rueidis.Lua }

// NewScript prepares src.
func NewScript(src string) *Script { return &Script{lua: rueidis.NewLuaScript(src)} }

// RunScript runs s with keys and args, waiting for Redis at most timeout, and returns its
// reply, an array of integers. Like Get's, a failure or a timeout is Failed (counted, logged at
// most once per downLogInterval, and a step towards marking Redis down) and nothing is sent
// while Redis is marked down (Skipped).
func (c *Client) RunScript(s *Script, timeout time.Duration, keys, args []string) ([]int64, Status) {
	rc := c.usable("script")
	if rc == nil {
		return nil, Skipped
	}
	ctx, cancel := context.WithTimeout(c.ctx, timeout)
	v, err := s.lua.Exec(ctx, rc, keys, args).AsIntSlice()
	cancel()
	if err != nil {
		c.failed("script", err)
		return nil, Failed
	}
	c.ok()
	return v, Hit
}
