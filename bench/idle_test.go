//go:build linux

package main

import (
	"os"
	"testing"
)

func TestParseInitTrace(t *testing.T) {
	trace := "init internal/bytealg @0.004 ms, 0 ms clock, 0 bytes, 0 allocs\n" +
		"init github.com/ethereum/go-ethereum/core/vm @57 ms, 2.5 ms clock, 313160 bytes, 4948 allocs\n" +
		"web3gate v1.2.3\n"
	got, err := parseInitTrace(trace)
	if err != nil {
		t.Fatal(err)
	}
	want := []initCost{{pkg: "internal/bytealg"}, {pkg: "github.com/ethereum/go-ethereum/core/vm", clock: 2.5, bytes: 313160, allocs: 4948}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("parseInitTrace = %+v, want %+v", got, want)
	}
	if _, err := parseInitTrace("web3gate v1.2.3\n"); err == nil {
		t.Fatal("parseInitTrace of a trace without init lines: no error")
	}
	if _, err := parseInitTrace("init x @1 ms, bad\n"); err == nil {
		t.Fatal("parseInitTrace of a malformed line: no error")
	}
}

func TestStatusKiB(t *testing.T) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	rss, err := statusKiB(raw, "VmRSS:")
	if err != nil || rss <= 0 || rss%1024 != 0 {
		t.Fatalf("statusKiB(VmRSS) = %d, %v", rss, err)
	}
	if _, err := statusKiB(raw, "NoSuchKey:"); err == nil {
		t.Fatal("statusKiB of a missing key: no error")
	}
}
