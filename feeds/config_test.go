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
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.c.Validate()
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
