package ratelimit

import (
	"strings"
	"testing"
)

func TestConfigDefaults(t *testing.T) {
	var c Config
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Client != DefaultClient || c.Principal != DefaultPrincipal || c.REST.IP != DefaultRESTIP || c.REST.Client != DefaultRESTClient ||
		c.Replicas != 1 || c.MaxKeys != 100000 || c.GetLogsBlocksPerUnit != 1000 || c.SubscribeBytesPerUnit != 1024 {
		t.Fatalf("defaults %+v", c)
	}
}

// TestConfigLocalMethodsFree: the methods web3gate answers itself may be made free, and
// are free by default.
func TestConfigLocalMethodsFree(t *testing.T) {
	c := Config{Costs: map[string]uint64{"eth_chainId": 0, "eth_uninstallFilter": 0, "eth_call": 3}}
	c.SetDefaults()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for m := range LocalMethods {
		if v, ok := DefaultCosts[m]; !ok || v != 0 {
			t.Errorf("%s: default cost %d (listed %v), want 0", m, v, ok)
		}
	}
	for m, v := range DefaultCosts {
		if v == 0 && !LocalMethods[m] {
			t.Errorf("%s is forwarded and free by default", m)
		}
	}
}

func TestConfigProblems(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"zero rate", Config{Client: Rate{Rate: 0, Burst: 5}}, "client.rate: must be a positive"},
		{"zero burst", Config{Principal: Rate{Rate: 5}}, "principal.burst: must be between 1"},
		{"replicas", Config{Replicas: -1}, "replicas: must be between 1 and 10000"},
		{"duplicate client", Config{Clients: []ClientConfig{{ClientID: "a", Rate: Rate{1, 1}}, {ClientID: "a", Rate: Rate{1, 1}}}}, "clients[1].clientId: duplicate of clients[0]"},
		{"label client", Config{Clients: []ClientConfig{{ClientID: "other", Rate: Rate{1, 1}}}}, `clients[0].clientId: "other" is a label value`},
		{"client without rate", Config{Clients: []ClientConfig{{ClientID: "a"}}}, "clients[0].rate: must be a positive"},
		{"principal without id", Config{Principals: []PrincipalConfig{{Rate: Rate{1, 1}}}}, "principals[0].id: must be a principal"},
		{"cost too high", Config{Costs: map[string]uint64{"eth_call": 1 << 30}}, "costs.eth_call: at most"},
		{"forwarded method free", Config{Costs: map[string]uint64{"web3_sha3": 0}}, "costs.web3_sha3: must be at least 1: the method is forwarded"},
		{"client's forwarded method free", Config{Clients: []ClientConfig{{ClientID: "a", Rate: Rate{1, 1}, Costs: map[string]uint64{"eth_syncing": 0}}}}, "clients[0].costs.eth_syncing: must be at least 1"},
		{"rest ip", Config{REST: RESTConfig{IP: Rate{Rate: -1, Burst: 1}}}, "rest.ip.rate: must be a positive"},
		{"maxKeys", Config{MaxKeys: 3}, "maxKeys: must be between 16"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.SetDefaults()
			err := tc.cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
