package main

import (
	"strings"
	"testing"

	"github.com/web3gate/web3gate/config"
)

// TestQuotaUsageRoute: the shipped config.yaml with quotas enabled and a quota for the dev
// client serves GET /v1/admin/usage on the admin listener (zeros for a client without usage,
// the configured quota, 400 without a client id) and exports the quota metrics.
func TestQuotaUsageRoute(t *testing.T) {
	cfg := devConfig(t)
	on := strings.Replace(cfg, "quotas:\n", "quotas:\n  clients: [{clientId: "+config.DevClientID+", daily: 5000}]\n", 1)
	on = strings.Replace(on, "  enabled: false\n  # Usage charged", "  enabled: true\n  # Usage charged", 1)
	on = strings.Replace(on, "  clients: []\n  # clients:", "  # clients:", 1)
	if on == cfg || strings.Count(on, "enabled: true\n  # Usage charged") != 1 || strings.Contains(on, "clients: []\n  # clients:") {
		t.Fatal("config.yaml changed: the quotas section was not found")
	}
	ts := startServer(t, on)
	code, body := get(t, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID)
	if code != 200 || !strings.Contains(body, `"clientId":"`+config.DevClientID+`","enforced":true`) ||
		!strings.Contains(body, `"used":0,"quota":5000,"remaining":5000`) || !strings.Contains(body, `"error":null`) {
		t.Fatalf("usage of the dev client: %d %s", code, body)
	}
	code, body = get(t, ts.Admin+"/v1/admin/usage?clientId=nobody")
	if code != 200 || !strings.Contains(body, `"enforced":false`) || !strings.Contains(body, `"used":0,"quota":null,"remaining":null`) {
		t.Fatalf("usage of an unknown client: %d %s", code, body)
	}
	if code, body := get(t, ts.Admin+"/v1/admin/usage"); code != 400 || !strings.Contains(body, "clientId: required") {
		t.Fatalf("without clientId: %d %s", code, body)
	}
	code, body = get(t, ts.Admin+"/metrics")
	if code != 200 || !strings.Contains(body, `web3gate_quota_units_total{client="`+config.DevClientID+`"} 0`) ||
		!strings.Contains(body, `web3gate_quota_units_total{client="other"} 0`) || !strings.Contains(body, "web3gate_quota_flush_errors_total 0") {
		t.Fatalf("metrics lack the quota series")
	}
}
