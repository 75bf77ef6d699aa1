package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// A collector that refuses the export: the failure is logged once, through the server's
// logger, and neither the line nor anything else shows the export's credentials.
func TestFailedExportIsLoggedWithoutSecrets(t *testing.T) {
	var got atomic.Value
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}))
	defer collector.Close()
	core, logs := observer.New(zap.DebugLevel)
	cfg := Config{Enabled: true, Endpoint: collector.URL, Headers: map[string]Secret{"Authorization": "Bearer s3cret-export-token"},
		Interval: 10 * time.Millisecond, Timeout: 2 * time.Second}
	p, err := New(cfg, Deps{Logger: zap.New(core), Version: "test", Replica: "r1"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.Tracer("test").Start(context.Background(), "root")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if got.Load() != "Bearer s3cret-export-token" {
		t.Fatalf("the collector got Authorization %q", got.Load())
	}
	failed := logs.FilterMessage("trace export failed; its spans are dropped").All()
	if len(failed) != 1 || failed[0].ContextMap()["spans"] != int64(1) {
		t.Fatalf("export failure lines: %+v", logs.All())
	}
	for _, e := range logs.All() {
		line := e.Message
		for k, v := range e.ContextMap() {
			line += " " + k + "=" + fmt.Sprint(v)
		}
		if strings.Contains(line, "s3cret") {
			t.Errorf("a log line shows the export's credentials: %s", line)
		}
		if !strings.Contains(line, "401") && e.Message == "trace export failed; its spans are dropped" {
			t.Errorf("the line does not say why: %s", line)
		}
	}
}

// Unsampled parents and background work get no child span: Start returns the context as
// it was and a nil span, which End accepts.
func TestStartUnderNoRecordingSpan(t *testing.T) {
	p, err := New(Config{Enabled: true, SampleRatio: new(float64)}, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	tr := p.Tracer("test")
	ctx := context.Background()
	if c, s := Start(ctx, tr, "child"); c != ctx || s != nil {
		t.Fatalf("a span without a parent: %v", s)
	}
	rctx, root := tr.Start(ctx, "root") // sampleRatio 0: not recorded
	if root.IsRecording() {
		t.Fatal("the root span records at sampleRatio 0")
	}
	if c, s := Start(rctx, tr, "child"); c != rctx || s != nil {
		t.Fatalf("a child of an unsampled span: %v", s)
	}
	End(nil, nil)
	if c, s := Start(rctx, nil, "child"); c != rctx || s != nil {
		t.Fatal("a span with tracing off")
	}
}
