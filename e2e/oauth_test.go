package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"
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
