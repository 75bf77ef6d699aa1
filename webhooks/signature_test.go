package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1","type":"transaction.mined"}`)
	now := time.Unix(1_800_000_000, 0)
	sig := Sign(testSecret, now, body)
	if !strings.HasPrefix(sig, "t=1800000000,v1=") || len(sig) != len("t=1800000000,v1=")+64 {
		t.Fatalf("header %q", sig)
	}
	// The documented construction, computed independently.
	m := hmac.New(sha256.New, []byte(testSecret))
	m.Write([]byte("1800000000." + string(body)))
	if want := "t=1800000000,v1=" + hex.EncodeToString(m.Sum(nil)); sig != want {
		t.Fatalf("Sign = %q, want %q", sig, want)
	}
	for _, tc := range []struct {
		name           string
		secret, header string
		body           string
		at             time.Time
		want           error
	}{
		{"valid", testSecret, sig, string(body), now.Add(time.Minute), nil},
		{"rotated: a second v1", testSecret, "t=1800000000,v1=" + strings.Repeat("00", 32) + "," + strings.TrimPrefix(sig, "t=1800000000,"), string(body), now, nil},
		{"other secret", "whsec_other", sig, string(body), now, ErrSignatureMismatch},
		{"body changed", testSecret, sig, string(body) + " ", now, ErrSignatureMismatch},
		{"timestamp changed", testSecret, strings.Replace(sig, "t=1800000000", "t=1800000001", 1), string(body), now, ErrSignatureMismatch},
		{"too old", testSecret, sig, string(body), now.Add(6 * time.Minute), ErrSignatureExpired},
		{"from the future", testSecret, sig, string(body), now.Add(-6 * time.Minute), ErrSignatureExpired},
		{"no v1", testSecret, "t=1800000000", string(body), now, ErrBadSignatureHeader},
		{"no t", testSecret, strings.TrimPrefix(sig, "t=1800000000,"), string(body), now, ErrBadSignatureHeader},
		{"bad hex", testSecret, "t=1800000000,v1=zz", string(body), now, ErrBadSignatureHeader},
		{"garbage", testSecret, "nonsense", string(body), now, ErrBadSignatureHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Verify(tc.secret, tc.header, []byte(tc.body), 5*time.Minute, tc.at); !errors.Is(err, tc.want) {
				t.Errorf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
}

// The receiver snippets of docs/webhooks.md ("Checking the signature") are tested here: the
// Go one is the function below, which must appear on that page as it is here; the JavaScript
// one is run with node.

// webhooksPage is the user documentation page that shows the snippets.
var webhooksPage = filepath.Join("..", "docs", "webhooks.md")

// pageBlock is the fenced code block of docs/webhooks.md that follows the marker comment.
func pageBlock(t *testing.T, marker string) string {
	t.Helper()
	raw, err := os.ReadFile(webhooksPage)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(raw), "<!-- "+marker+" -->\n")
	if !ok {
		t.Fatalf("%s has no <!-- %s --> marker", webhooksPage, marker)
	}
	_, code, ok := strings.Cut(after, "\n") // the opening fence
	code, _, ok2 := strings.Cut(code, "\n```\n")
	if !ok || !ok2 {
		t.Fatalf("%s: no code block after <!-- %s -->", webhooksPage, marker)
	}
	return code
}

// docs-go-start
// verify reports whether body, received with the Web3gate-Signature header sig, was signed by
// web3gate with secret (the endpoint's whsec_... string) less than 5 minutes ago.
func verify(secret, sig string, body []byte) bool {
	var ts string
	var sigs []string
	for _, part := range strings.Split(sig, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sigs = append(sigs, v)
		}
	}
	t, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(t, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	want := hex.EncodeToString(mac.Sum(nil))
	for _, s := range sigs {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

// docs-go-end

func TestWebhooksPageGoSnippet(t *testing.T) {
	src, err := os.ReadFile("signature_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, _ := strings.Cut(string(src), "// docs-go-start\n")
	fn, _, _ = strings.Cut(fn, "\n// docs-go-end")
	fn = strings.TrimSpace(fn)
	if block := pageBlock(t, "webhook-verify-go"); !strings.Contains(block, fn) {
		t.Errorf("the Go snippet of docs/webhooks.md is not the tested function:\n%s\nwant it to contain:\n%s", block, fn)
	}
	body := []byte(`{"id":"evt_7"}`)
	sig := Sign(testSecret, time.Now(), body)
	if !verify(testSecret, sig, body) {
		t.Error("a fresh signature does not verify")
	}
	if verify(testSecret, sig, append(body, ' ')) || verify("whsec_x", sig, body) ||
		verify(testSecret, Sign(testSecret, time.Now().Add(-10*time.Minute), body), body) {
		t.Error("a changed body, another secret or an old signature verifies")
	}
}

func TestWebhooksPageJavaScriptSnippet(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed to check the JavaScript snippet of docs/webhooks.md: %v", err)
	}
	script := pageBlock(t, "webhook-verify-js") + `
const [secret, sig, body] = process.argv.slice(2);
console.log(String(verify(secret, sig, Buffer.from(body, "base64"))));
`
	path := filepath.Join(t.TempDir(), "verify.js")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_7","transaction":{"hash":"0xé"}}`)
	now := time.Now()
	for _, tc := range []struct {
		name, secret, sig string
		body              []byte
		want              string
	}{
		{"valid", testSecret, Sign(testSecret, now, body), body, "true"},
		{"body changed", testSecret, Sign(testSecret, now, body), append([]byte("x"), body...), "false"},
		{"other secret", "whsec_other", Sign(testSecret, now, body), body, "false"},
		{"too old", testSecret, Sign(testSecret, now.Add(-10*time.Minute), body), body, "false"},
		{"bad hex", testSecret, "t=" + strconv.FormatInt(now.Unix(), 10) + ",v1=zz", body, "false"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.Command(node, path, tc.secret, tc.sig, base64.StdEncoding.EncodeToString(tc.body)).CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != tc.want {
				t.Errorf("node: %v: %q, want %s", err, out, tc.want)
			}
		})
	}
}

// FuzzVerify: whatever a receiver is sent as the signature header and body, Verify does not
// panic, answers nil or one of its three errors, and accepts only a header that carries the
// HMAC of its own timestamp and the body; what Sign makes it always accepts.
func FuzzVerify(f *testing.F) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"id":"evt_1"}`)
	f.Add(Sign(testSecret, now, body), body)
	f.Add("t=1800000000,v1=00,v1=zz", []byte(""))
	f.Add(" t = 1 , v1= ", []byte("x"))
	f.Add("t=-9223372036854775808,v1="+strings.Repeat("ab", 32), []byte("{}"))
	f.Add("t=1,t=2,v1=", []byte(nil))
	f.Add(",,,", []byte("\x00"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		if err := Verify(testSecret, Sign(testSecret, now, body), body, 5*time.Minute, now); err != nil {
			t.Fatalf("Verify refused Sign's header: %v", err)
		}
		err := Verify(testSecret, header, body, 0, now)
		if err != nil {
			if !errors.Is(err, ErrBadSignatureHeader) && !errors.Is(err, ErrSignatureMismatch) && !errors.Is(err, ErrSignatureExpired) {
				t.Fatalf("Verify(%q) = %v: not one of its errors", header, err)
			}
			return
		}
		var ts string
		for _, part := range strings.Split(header, ",") {
			if k, v, _ := strings.Cut(strings.TrimSpace(part), "="); k == "t" {
				ts = v
			}
		}
		if !strings.Contains(strings.ToLower(header), hex.EncodeToString(mac(testSecret, ts, body))) {
			t.Fatalf("Verify accepted %q without the HMAC of its timestamp %q and the body", header, ts)
		}
	})
}
