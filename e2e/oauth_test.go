package e2e

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestOAuthClientCredentials: `web3gate clients new`, then a token from POST
// /v1/oauth2/token, then that token as the bearer of a signing call on the dev chain.
func TestOAuthClientCredentials(t *testing.T) {
	dir := t.TempDir()
	cfg := shippedConfig(t, dir)
	cfgPath := writeConfig(t, dir, cfg)
	out, err := exec.Command(binary, "clients", "new", "--principal", "dev", "--config", cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("clients new: %v\n%s", err, out)
	}
	id := regexp.MustCompile(`client_id:\s+(\S+)`).FindStringSubmatch(string(out))
	secret := regexp.MustCompile(`client_secret:\s+(\S+)`).FindStringSubmatch(string(out))
	if id == nil || secret == nil {
		t.Fatalf("clients new printed:\n%s", out)
	}

	g := startGateway(t, cfg)
	token := func(form url.Values, user, pass string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodPost, g.API+"/v1/oauth2/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("token response %d %s", resp.StatusCode, b)
		}
		return resp.StatusCode, m
	}
	code, m := token(url.Values{"grant_type": {"client_credentials"}, "scope": {"eth_sign"}}, id[1], secret[1])
	access, _ := m["access_token"].(string)
	if code != 200 || access == "" || m["token_type"] != "Bearer" || m["scope"] != "eth_sign" {
		t.Fatalf("token: %d %v", code, m)
	}
	if code, m := token(url.Values{"grant_type": {"client_credentials"}}, id[1], "wrong"); code != 401 || m["error"] != "invalid_client" {
		t.Fatalf("wrong secret: %d %v", code, m)
	}

	call := func(bearer string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, g.API+"/v1/web3/mainnet", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_accounts","params":[]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "web3gate-dev")
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := call(access); code != 200 || !strings.Contains(body, "0x169E8AF7B0bE789C52Ee116Dc358C5df45b22903") {
		t.Fatalf("eth_accounts with the issued token: %d %s", code, body)
	}
	// A signature character well before the end: the last ones carry base64url padding bits.
	tampered := []byte(access)
	if i := len(tampered) - 10; tampered[i] == 'x' {
		tampered[i] = 'y'
	} else {
		tampered[i] = 'x'
	}
	if code, body := call(string(tampered)); code != 401 || !strings.Contains(body, "Not Authorized") {
		t.Fatalf("tampered token: %d %s", code, body)
	}
	if logs := g.logs.String(); strings.Contains(logs, secret[1]) || strings.Contains(logs, access) {
		t.Fatal("the client secret or the access token reached the logs")
	}
}

// TestOAuthClientRevocation: a client disabled with `web3gate clients disable` on the store
// of a running server gets no new token, and the token it holds is refused within
// auth.oauth.revocationCheckInterval; the admin API enables it again (the old token is
// accepted again within the interval) and disables it again.
func TestOAuthClientRevocation(t *testing.T) {
	const adminToken = "e2e-clients-admin-token"
	const interval = time.Second
	dir := t.TempDir()
	cfg := shippedConfig(t, dir,
		"revocationCheckInterval: 10s", "revocationCheckInterval: "+interval.String(),
		"      tokens: []", "      tokens: [{name: e2e-ops, sha256: "+sha256Hex(adminToken)+"}]")
	cfgPath := writeConfig(t, dir, cfg)
	cli := func(args ...string) (int, string) {
		t.Helper()
		out, err := exec.Command(binary, append(args, "--config", cfgPath)...).CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, string(out)
		case errors.As(err, &exit):
			return exit.ExitCode(), string(out)
		}
		t.Fatalf("%v: %v", args, err)
		return 0, ""
	}
	code, out := cli("clients", "new", "--principal", "dev")
	id := regexp.MustCompile(`client_id:\s+(\S+)`).FindStringSubmatch(out)
	secret := regexp.MustCompile(`client_secret:\s+(\S+)`).FindStringSubmatch(out)
	if code != 0 || id == nil || secret == nil {
		t.Fatalf("clients new: exit %d\n%s", code, out)
	}
	g := startGateway(t, cfg)

	token := func() (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.API+"/v1/oauth2/token", strings.NewReader("grant_type=client_credentials"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(id[1], secret[1])
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, m
	}
	call := func(bearer string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.API+"/v1/web3/mainnet", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"eth_accounts","params":[]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-API-Key", "web3gate-dev")
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	// eventually waits until the old token gets status, at most the interval plus a margin
	// for a loaded machine.
	eventually := func(step, access string, status int) {
		t.Helper()
		deadline := time.Now().Add(interval + 10*time.Second)
		for call(access) != status {
			if time.Now().After(deadline) {
				t.Fatalf("%s: the old token does not get %d", step, status)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	admin := func(action string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, g.Admin+"/v1/admin/clients/"+id[1]+"/"+action, nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	code, m := token()
	access, _ := m["access_token"].(string)
	if code != 200 || access == "" {
		t.Fatalf("token: %d %v", code, m)
	}
	if status := call(access); status != 200 {
		t.Fatalf("the token before any change: %d", status)
	}

	// Disabled with the CLI, next to the running server.
	if code, out := cli("clients", "disable", id[1]); code != 0 || !strings.Contains(out, "disabled since") {
		t.Fatalf("clients disable: exit %d\n%s", code, out)
	}
	if code, m := token(); code != 401 || m["error"] != "invalid_client" {
		t.Fatalf("token of the disabled client: %d %v", code, m)
	}
	eventually("disabled with the CLI", access, 401)

	// Enabled with the admin API.
	if code, body := admin("enable"); code != 200 || !strings.Contains(body, `"disabledAt":null`) {
		t.Fatalf("admin enable: %d %s", code, body)
	}
	eventually("enabled with the admin API", access, 200)
	if code, m := token(); code != 200 {
		t.Fatalf("token after enable: %d %v", code, m)
	}

	// Disabled with the admin API.
	if code, body := admin("disable"); code != 200 || strings.Contains(body, `"disabledAt":null`) {
		t.Fatalf("admin disable: %d %s", code, body)
	}
	eventually("disabled with the admin API", access, 401)

	// The CLI's errors.
	if code, out := cli("clients", "disable", "w3g_nobody"); code != 1 || !strings.Contains(out, `no client with id "w3g_nobody"`) {
		t.Fatalf("disable an unknown client: exit %d\n%s", code, out)
	}
	if code, out := cli("clients", "enable"); code != 2 || !strings.Contains(out, `expected "<CLIENT_ID>"`) {
		t.Fatalf("enable without an id: exit %d\n%s", code, out)
	}
	if lines := metric(t, g, `web3gate_oauth_token_failures_total{reason="disabled"}`); len(lines) != 1 || !strings.HasSuffix(lines[0], " 1") {
		t.Fatalf("disabled failures metric: %q", lines)
	}
	logs := g.logs.String()
	for _, s := range []string{secret[1], access, adminToken} {
		if strings.Contains(logs, s) {
			t.Fatal("a secret, a token or the admin token reached the logs")
		}
	}
	if !strings.Contains(logs, "token request refused: client authentication failed") {
		t.Fatalf("the refused token request is not logged:\n%s", logs)
	}
}
