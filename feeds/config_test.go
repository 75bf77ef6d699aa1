package feeds

import (
	"strings"
	"testing"
	"time"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if c.PollInterval != 250*time.Millisecond || c.History != 256 || c.MaxCatchUp != 1024 {
		t.Fatalf("defaults %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"poll interval too short", Config{PollInterval: time.Millisecond, History: 2, MaxCatchUp: 1}, "pollInterval: must be between 10ms and 1h"},
		{"negative poll interval", Config{PollInterval: -time.Second, History: 2, MaxCatchUp: 1}, "pollInterval: must be between 10ms and 1h"},
		{"history of one", Config{PollInterval: time.Second, History: 1, MaxCatchUp: 1}, "history: must be between 2 and 100000"},
		{"history too long", Config{PollInterval: time.Second, History: 100_001, MaxCatchUp: 1}, "history: must be between 2 and 100000"},
		{"negative maxCatchUp", Config{PollInterval: time.Second, History: 2, MaxCatchUp: -1}, "maxCatchUp: must be between 1 and 1000000"},
		{"push backoffs upside down", Config{PollInterval: time.Second, History: 2, MaxCatchUp: 1, Push: PushConfig{MinBackoff: time.Minute, MaxBackoff: time.Second}}, "push.minBackoff: must be at least 1ms and at most push.maxBackoff"},
		{"push message limit too small", Config{PollInterval: time.Second, History: 2, MaxCatchUp: 1, Push: PushConfig{MaxMessageBytes: 100}}, "push.maxMessageBytes: must be between 4096 and 67108864"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The keys a case does not set are the defaults.
			var d Config
			d.SetDefaults()
			c := tc.c
			c.StartWait = d.StartWait
			p := &c.Push
			if p.MinBackoff == 0 {
				p.MinBackoff = d.Push.MinBackoff
			}
			if p.MaxBackoff == 0 {
				p.MaxBackoff = d.Push.MaxBackoff
			}
			if p.MaxMessageBytes == 0 {
				p.MaxMessageBytes = d.Push.MaxMessageBytes
			}
			p.PingInterval, p.Queue = d.Push.PingInterval, d.Push.Queue
			err := c.Validate()
			if err == nil || err.Error() != tc.want {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Config{History: -5}, Deps{}); err == nil || !strings.Contains(err.Error(), "feeds config: history:") {
		t.Errorf("New with history -5: %v", err)
	}
	if _, err := New(Config{}, Deps{Chains: map[uint64]Chain{7: nil}}); err == nil || err.Error() != "feeds: chain 7 has no upstream pool" {
		t.Errorf("New with a nil chain: %v", err)
	}
}
