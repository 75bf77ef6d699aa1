//go:build linux

package main

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestCheckMined(t *testing.T) {
	if text, err := checkMined(5, nonceState{latest: 105, pending: 105}, 100); err != nil || !strings.HasPrefix(text, "nonce gaps: 0") {
		t.Fatalf("100 sends, 100 nonces mined: %q, %v", text, err)
	}
	for name, c := range map[string]struct {
		after nonceState
		ok    float64
		want  string
	}{
		"stuck behind a gap":      {nonceState{latest: 50, pending: 105}, 100, "stuck in the pool"},
		"answered but not mined":  {nonceState{latest: 100, pending: 100}, 100, "not on chain"},
		"nonces taken by errors":  {nonceState{latest: 110, pending: 110}, 100, "not answered ok"},
		"pending behind latest?!": {nonceState{latest: 105, pending: 104}, 100, "MISMATCH"},
	} {
		t.Run(name, func(t *testing.T) {
			text, err := checkMined(5, c.after, c.ok)
			if err == nil || !strings.Contains(text, c.want) || !strings.Contains(text, "MISMATCH") {
				t.Fatalf("checkMined = %q, %v; want an error mentioning %q", text, err, c.want)
			}
		})
	}
}

func TestCheckHandedOut(t *testing.T) {
	if _, err := checkHandedOut(0, 101, 100); err != nil {
		t.Fatalf("contiguous nonces refused: %v", err)
	}
	for _, next := range []uint64{100, 102} {
		if _, err := checkHandedOut(0, next, 100); err == nil {
			t.Errorf("next nonce %d after 100 signatures from nonce 0 accepted", next)
		}
	}
}

func TestPerSecond(t *testing.T) {
	t0 := time.Unix(1000, 0)
	ticks := []tick{{t0, 10}, {t0.Add(time.Second), 110}, {t0.Add(2 * time.Second), 160}, {t0.Add(3 * time.Second), 170}}
	got := perSecond(ticks, t0.Add(2*time.Second+time.Millisecond))
	if len(got) != 2 || got[0] != 100 || got[1] != 50 {
		t.Fatalf("perSecond = %v, want [100 50] (the interval ending after the load left out)", got)
	}
	if secsText(got) != "100 → 50, min 50" || secsText(nil) != "none" {
		t.Fatalf("secsText: %q", secsText(got))
	}
}

func TestSignConfigBytes(t *testing.T) {
	raw := []byte(`server:
  listen: 127.0.0.1:8545
admin:
  listen: 127.0.0.1:9545
log:
  level: info
auth:
  oauth:
    signingKeyFile: jwt-signing-key.pem
store:
  path: web3gate.db
wallet:
  keys:
    dir: keystore
  transactions:
    maxInFlight: 16
    pollInterval: 1s
`)
	out, err := signConfigBytes(raw, 1, 2, "/tmp/x", [][2]string{{"maxInFlight", "1000000"}, {"pollInterval", "100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Auth struct {
			OAuth struct {
				SigningKeyFile string `yaml:"signingKeyFile"`
			} `yaml:"oauth"`
		} `yaml:"auth"`
		Store struct {
			Path string `yaml:"path"`
		} `yaml:"store"`
		Wallet struct {
			Keys struct {
				Dir string `yaml:"dir"`
			} `yaml:"keys"`
			Transactions struct {
				MaxInFlight  int    `yaml:"maxInFlight"`
				PollInterval string `yaml:"pollInterval"`
			} `yaml:"transactions"`
		} `yaml:"wallet"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Path != "/tmp/x/web3gate.db" || cfg.Wallet.Keys.Dir != "/tmp/x/keystore" ||
		cfg.Auth.OAuth.SigningKeyFile != "/tmp/x/jwt-signing-key.pem" ||
		cfg.Wallet.Transactions.MaxInFlight != 1000000 || cfg.Wallet.Transactions.PollInterval != "100ms" {
		t.Fatalf("config:\n%s", out)
	}
	if _, err := signConfigBytes(raw, 1, 2, "/tmp/x", [][2]string{{"noSuchKey", "1"}}); err == nil {
		t.Error("an unknown wallet.transactions key was accepted")
	}

	// A key backend's section, absent from the config, is added; the keys present are set.
	out, err = signConfigBytes(raw, 1, 2, "/tmp/x", nil,
		[2]string{"wallet.awskms.enabled", "true"}, [2]string{"wallet.awskms.endpoint", "http://127.0.0.1:9"},
		[2]string{"wallet.keys.dir", "/tmp/y"})
	if err != nil {
		t.Fatal(err)
	}
	var kms struct {
		Wallet struct {
			Keys struct {
				Dir string `yaml:"dir"`
			} `yaml:"keys"`
			AWSKMS struct {
				Enabled  bool   `yaml:"enabled"`
				Endpoint string `yaml:"endpoint"`
			} `yaml:"awskms"`
		} `yaml:"wallet"`
	}
	if err := yaml.Unmarshal(out, &kms); err != nil {
		t.Fatal(err)
	}
	if !kms.Wallet.AWSKMS.Enabled || kms.Wallet.AWSKMS.Endpoint != "http://127.0.0.1:9" || kms.Wallet.Keys.Dir != "/tmp/y" {
		t.Fatalf("config with a key backend:\n%s", out)
	}
}

func TestParseFlagsOnly(t *testing.T) {
	for _, args := range [][]string{{"-only", "signing"}, {"-only", "proxy"}, {"-only", "ratelimit"}, {}} {
		if _, err := parseFlags(args); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
	for _, args := range [][]string{{"-only", "sign"}, {"-only", "signing", "-forwarder"}, {"-send-duration", "1500ms"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

func TestSignSampleProblems(t *testing.T) {
	s := signSample{sample: sample{wrk: wrkResult{Requests: 10, Duration: time.Second}, calls: &counters{calls: map[string]float64{"ok": 10}}}}
	if p := s.problems(); p != "" {
		t.Fatalf("clean: %q", p)
	}
	s.issues = []string{"nonce MISMATCH"}
	s.calls.calls["-32005"] = 3
	if p := s.problems(); !strings.Contains(p, "-32005") || !strings.Contains(p, "MISMATCH") {
		t.Fatalf("problems = %q", p)
	}
	if signFailures([]signRound{{"g": s}}) == "" {
		t.Fatal("signFailures missed the round")
	}
}
