//go:build linux

package main

import (
	"strings"
	"testing"
	"time"
)

func TestParseWrk(t *testing.T) {
	out := []byte(`Running 4s test @ http://127.0.0.1:1/
  1 threads and 32 connections
  Non-2xx or 3xx responses: 7
Requests/sec:  1000.00
WRKRESULT requests=4000 duration_us=4000000 bytes=640000 connect=0 read=2 write=0 status=7 timeout=1 p50_us=75 p90_us=120 p99_us=300
`)
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{Requests: 4000, Duration: 4 * time.Second, Bytes: 640000, Read: 2, Status: 7, Timeout: 1,
		P50: 75 * time.Microsecond, P90: 120 * time.Microsecond, P99: 300 * time.Microsecond}
	if r != want {
		t.Fatalf("parseWrk = %+v, want %+v", r, want)
	}
	if r.Rate() != 1000 || r.Errors() != 10 {
		t.Fatalf("rate %v errors %v, want 1000 and 10", r.Rate(), r.Errors())
	}
	if got, want := r.ErrorText(), "HTTP status >= 400: 7, read: 2, timeout: 1"; got != want {
		t.Fatalf("ErrorText = %q, want %q", got, want)
	}
}

func TestParseWrkRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"no result line": "unable to connect to 127.0.0.1:1 Connection refused\n",
		"missing field":  "WRKRESULT requests=1 duration_us=1\n",
		"not a number":   "WRKRESULT requests=x duration_us=1 bytes=0 connect=0 read=0 write=0 status=0 timeout=0 p50_us=0 p90_us=0 p99_us=0\n",
		"no time":        "WRKRESULT requests=0 duration_us=0 bytes=0 connect=0 read=0 write=0 status=0 timeout=0 p50_us=0 p90_us=0 p99_us=0\n",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := parseWrk([]byte(out)); err == nil {
				t.Fatal("parseWrk accepted it")
			}
		})
	}
}

func TestLuaString(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":"b"}`:      `"{\"a\":\"b\"}"`,
		`back\slash`:     `"back\\slash"`,
		"line\nbreak":    `"line\10break"`,
		"Bearer 0a1b2c3": `"Bearer 0a1b2c3"`,
	} {
		t.Run(in, func(t *testing.T) {
			if got := luaString(in); got != want {
				t.Errorf("luaString(%q) = %s, want %s", in, got, want)
			}
		})
	}
}

func TestSampleProblems(t *testing.T) {
	clean := sample{wrk: wrkResult{Requests: 100, Duration: time.Second}, warm: wrkResult{Requests: 10, Duration: time.Second},
		calls: &counters{calls: map[string]float64{"ok": 112}, upstream: map[string]float64{"ok": 113}}}
	if p := clean.problems(); p != "" {
		t.Fatalf("clean run: problems %q", p)
	}
	for name, s := range map[string]sample{
		"socket errors in the warm-up": {wrk: clean.wrk, warm: wrkResult{Connect: 1}},
		"JSON-RPC errors":              {wrk: clean.wrk, calls: &counters{calls: map[string]float64{"ok": 90, "4100": 10}}},
		"upstream failures":            {wrk: clean.wrk, calls: &counters{calls: map[string]float64{"ok": 100}, upstream: map[string]float64{"timeout": 1}}},
		"fewer ok calls than answers":  {wrk: clean.wrk, calls: &counters{calls: map[string]float64{"ok": 99}}},
	} {
		t.Run(name, func(t *testing.T) {
			if s.problems() == "" {
				t.Fatal("no problem reported")
			}
		})
	}
}

func TestSetYAML(t *testing.T) {
	cfg, err := devConfigBytes([]byte("server:\n  listen: 127.0.0.1:8545 # the API\nadmin:\n  listen: 127.0.0.1:9545\nlog:\n  level: info\n"), 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"listen: 127.0.0.1:1", "listen: 127.0.0.1:2", "level: warn", "rateLimit:\n    rest:\n        enabled: false\n    enabled: false"} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	if _, err := devConfigBytes([]byte("server:\n  listen: x\n"), 1, 2); err == nil {
		t.Error("a config without admin.listen was accepted")
	}
}
