//go:build !nodevchain

package devchain

import (
	"testing"

	"github.com/ethereum/go-ethereum/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestZapHandlerKeepsWarnAndAbove(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := log.NewLogger(newZapHandler(zap.New(core), log.LevelWarn))

	l.Trace("trace")
	l.Debug("debug")
	l.Info("info")
	l.Warn("warn", "a", 1)
	l.Error("error", "b", "x")
	l.Write(log.LevelCrit, "crit") // Crit itself exits the process; Write logs at its level only

	got := logs.AllUntimed()
	want := []struct {
		msg   string
		level zapcore.Level
	}{{"warn", zapcore.WarnLevel}, {"error", zapcore.ErrorLevel}, {"crit", zapcore.ErrorLevel}}
	if len(got) != len(want) {
		t.Fatalf("%d entries, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Message != w.msg || got[i].Level != w.level {
			t.Errorf("entry %d = %s %q, want %s %q", i, got[i].Level, got[i].Message, w.level, w.msg)
		}
	}
}

func TestZapHandlerFields(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	l := log.NewLogger(newZapHandler(zap.New(core), log.LevelWarn))

	l.With("peer", "p1").Warn("dropped", "reason", "timeout", "count", 3)

	got := logs.AllUntimed()
	if len(got) != 1 {
		t.Fatalf("%d entries, want 1", len(got))
	}
	fields := got[0].ContextMap()
	if fields["peer"] != "p1" || fields["reason"] != "timeout" || fields["count"] != int64(3) {
		t.Fatalf("fields = %v, want peer=p1 reason=timeout count=3", fields)
	}
}

func TestZapHandlerGroups(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	h := newZapHandler(zap.New(core), log.LevelWarn).WithGroup("rpc")
	l := log.NewLogger(h)

	l.Warn("slow", "method", "eth_call")

	fields := logs.AllUntimed()[0].ContextMap()
	if fields["rpc.method"] != "eth_call" {
		t.Fatalf("fields = %v, want rpc.method=eth_call", fields)
	}
}
