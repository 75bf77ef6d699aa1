package integration

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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
	ts := startServer(t, withAdminToken(t, on))
	code, body := get(t, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID, adminAuth...)
	if code != 200 || !strings.Contains(body, `"clientId":"`+config.DevClientID+`","enforced":true`) ||
		!strings.Contains(body, `"used":0,"quota":5000,"remaining":5000`) || !strings.Contains(body, `"error":null`) {
		t.Fatalf("usage of the dev client: %d %s", code, body)
	}
	code, body = get(t, ts.Admin+"/v1/admin/usage?clientId=nobody", adminAuth...)
	if code != 200 || !strings.Contains(body, `"enforced":false`) || !strings.Contains(body, `"used":0,"quota":null,"remaining":null`) {
		t.Fatalf("usage of an unknown client: %d %s", code, body)
	}
	if code, body := get(t, ts.Admin+"/v1/admin/usage", adminAuth...); code != 400 || !strings.Contains(body, "clientId: required") {
		t.Fatalf("without clientId: %d %s", code, body)
	}
	code, body = get(t, ts.Admin+"/metrics")
	if code != 200 || !strings.Contains(body, `web3gate_quota_units_total{client="`+config.DevClientID+`"} 0`) ||
		!strings.Contains(body, `web3gate_quota_units_total{client="other"} 0`) || !strings.Contains(body, "web3gate_quota_flush_errors_total 0") {
		t.Fatalf("metrics lack the quota series")
	}
}

// TestQuotaSpentThroughServer: with a daily quota of 3 units for the dev client, three
// eth_blockNumber calls (a unit each) pass, the fourth is refused by the rate-limit stage with
// the quota's own message (-32005, HTTP 429, Retry-After until the next UTC midnight), and the
// admin usage route reports the 3 units used.
func TestQuotaSpentThroughServer(t *testing.T) {
	cfg := devConfig(t)
	on := strings.Replace(cfg, "quotas:\n", "quotas:\n  clients: [{clientId: "+config.DevClientID+", daily: 3}]\n", 1)
	on = strings.Replace(on, "  enabled: false\n  # Usage charged", "  enabled: true\n  # Usage charged", 1)
	on = strings.Replace(on, "  clients: []\n  # clients:", "  # clients:", 1)
	on = strings.Replace(on, "allowReadsWithClientId: false", "allowReadsWithClientId: true", 1)
	if on == cfg || strings.Count(on, "enabled: true\n  # Usage charged") != 1 || !strings.Contains(on, "allowReadsWithClientId: true") {
		t.Fatal("config.yaml changed: the quotas section was not found")
	}
	ts := startServer(t, withAdminToken(t, on))
	call := func() (int, http.Header, string) {
		req, err := http.NewRequest(http.MethodPost, ts.API+"/v1/web3/mainnet", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_blockNumber","params":[]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", config.DevClientID)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, string(b)
	}
	for i := range 3 {
		if code, _, body := call(); code != 200 || !strings.Contains(body, `"result":"0x`) {
			t.Fatalf("call %d within the quota: %d %s", i+1, code, body)
		}
	}
	code, h, body := call()
	if code != http.StatusTooManyRequests || !strings.Contains(body, `"code":-32005`) ||
		!strings.Contains(body, "quota exceeded: daily quota of 3 units spent") {
		t.Fatalf("call past the quota: %d %s", code, body)
	}
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	now := time.Now().UTC()
	toMidnight := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC).Sub(now)
	if err != nil || ra < 1 || time.Duration(ra)*time.Second > toMidnight+2*time.Second {
		t.Fatalf("Retry-After %q, want the seconds to the next UTC midnight (%v)", h.Get("Retry-After"), toMidnight)
	}
	code, usage := get(t, ts.Admin+"/v1/admin/usage?clientId="+config.DevClientID, adminAuth...)
	if code != 200 || !strings.Contains(usage, `"used":3,"quota":3,"remaining":0`) {
		t.Fatalf("usage after the quota was spent: %d %s", code, usage)
	}
}
