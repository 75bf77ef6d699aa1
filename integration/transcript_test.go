package integration

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/web3gate/web3gate/config"
)

// TestTranscripts replays testdata/*.rpc through the whole compiled chain of a server on the
// embedded dev chain. Each file is a conversation:
//
//	// a comment
//	@path /v1/web3/chains/1337      the path of the following requests (default /v1/web3/mainnet)
//	@method GET                     the HTTP method (default POST)
//	@header Name: value             set a request header ("Name:" alone removes it)
//	@reset                          back to the defaults (dev credentials, JSON content type)
//	--> {"jsonrpc":"2.0",...}       send this body
//	--> @size 5000                  send a JSON-RPC body padded to 5000 bytes
//	<-- 200 {"jsonrpc":"2.0",...}   expect this status and JSON body
//	<-- 204                         expect this status and an empty body
//
// In an expected body the string "*" matches any value and "0x*" any 0x-prefixed string.
//
// The files of testdata/strict run against a server in the strict form of the transaction
// methods (wallet.transactions.fill: false), the others against the shipped form.
func TestTranscripts(t *testing.T) {
	for _, set := range []struct {
		glob, config string
	}{
		{"testdata/*.rpc", devConfig(t)},
		{"testdata/strict/*.rpc", strictConfig(t)},
	} {
		files, err := filepath.Glob(set.glob)
		if err != nil || len(files) == 0 {
			t.Fatalf("no transcripts %s: %v", set.glob, err)
		}
		ts := startServer(t, set.config)
		for _, f := range files {
			t.Run(strings.TrimPrefix(f, "testdata/"), func(t *testing.T) { runTranscript(t, ts.API, f) })
		}
	}
}

func defaultHeaders() map[string]string {
	return map[string]string{
		"Content-Type":  "application/json",
		"X-API-Key":     config.DevClientID,
		"Authorization": "Bearer " + config.DevToken,
	}
}

func runTranscript(t *testing.T, base, file string) {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	path, method, headers := "/v1/web3/mainnet", http.MethodPost, defaultHeaders()
	var (
		got     int // the status of the request awaiting its expectation; 0: none
		gotBody []byte
		sent    string
		lineNo  int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lineNo++
		line := strings.TrimSpace(sc.Text())
		where := fmt.Sprintf("%s:%d", file, lineNo)
		switch {
		case line == "" || strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "@path "):
			path = strings.TrimSpace(line[len("@path "):])
		case strings.HasPrefix(line, "@method "):
			method = strings.TrimSpace(line[len("@method "):])
		case strings.HasPrefix(line, "@header "):
			name, value, _ := strings.Cut(line[len("@header "):], ":")
			name, value = strings.TrimSpace(name), strings.TrimSpace(value)
			if value == "" {
				delete(headers, name)
			} else {
				headers[name] = value
			}
		case line == "@reset":
			path, method, headers = "/v1/web3/mainnet", http.MethodPost, defaultHeaders()
		case strings.HasPrefix(line, "-->"):
			sent = strings.TrimSpace(line[3:])
			body := []byte(sent)
			if n, ok := strings.CutPrefix(sent, "@size "); ok {
				size, _ := strconv.Atoi(n)
				body = paddedRequest(size)
			}
			got, _, gotBody = request(t, method, base+path, body, headerPairs(headers)...)
		case strings.HasPrefix(line, "<--"):
			if got == 0 {
				t.Fatalf("%s: expectation without a request", where)
			}
			status, want, _ := strings.Cut(strings.TrimSpace(line[3:]), " ")
			if strconv.Itoa(got) != status {
				t.Errorf("%s: sent %s\n  status %d, want %s (body %s)", where, sent, got, status, gotBody)
			}
			if err := matchJSON(strings.TrimSpace(want), gotBody); err != nil {
				t.Errorf("%s: sent %s\n  %v\n  got  %s\n  want %s", where, sent, err, gotBody, want)
			}
			got = 0
		default:
			t.Fatalf("%s: cannot read line %q", where, line)
		}
	}
	if got != 0 {
		t.Errorf("%s: last request has no expectation", file)
	}
}

func paddedRequest(size int) []byte {
	head, tail := `{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":["`, `"]}`
	pad := size - len(head) - len(tail)
	return []byte(head + strings.Repeat("a", max(pad, 0)) + tail)
}

// matchJSON compares got with the expected JSON text, where "*" matches anything and "0x*"
// any 0x-prefixed string. An empty want expects an empty body.
func matchJSON(want string, got []byte) error {
	if want == "" {
		if len(bytes.TrimSpace(got)) != 0 {
			return fmt.Errorf("want an empty body")
		}
		return nil
	}
	var w, g any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		return fmt.Errorf("bad expectation: %v", err)
	}
	if err := json.Unmarshal(got, &g); err != nil {
		return fmt.Errorf("body is not JSON: %v", err)
	}
	return matchValue("$", w, g)
}

func matchValue(at string, w, g any) error {
	if s, ok := w.(string); ok {
		switch {
		case s == "*":
			return nil
		case s == "0x*":
			if gs, ok := g.(string); ok && strings.HasPrefix(gs, "0x") && len(gs) > 2 {
				return nil
			}
			return fmt.Errorf("%s: %v is not a 0x string", at, g)
		}
	}
	switch wv := w.(type) {
	case map[string]any:
		gv, ok := g.(map[string]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: object mismatch", at)
		}
		for k, v := range wv {
			gvv, ok := gv[k]
			if !ok {
				return fmt.Errorf("%s.%s: missing", at, k)
			}
			if err := matchValue(at+"."+k, v, gvv); err != nil {
				return err
			}
		}
		return nil
	case []any:
		gv, ok := g.([]any)
		if !ok || len(gv) != len(wv) {
			return fmt.Errorf("%s: array mismatch", at)
		}
		for i := range wv {
			if err := matchValue(fmt.Sprintf("%s[%d]", at, i), wv[i], gv[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(w, g) {
		return fmt.Errorf("%s: %v != %v", at, g, w)
	}
	return nil
}
