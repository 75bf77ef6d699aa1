package app

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// TestLoggerFormats: auto is JSON off a terminal and the console format on one (levels
// coloured); console and json are what they say whatever the writer; an unknown format is
// refused.
func TestLoggerFormats(t *testing.T) {
	for _, tc := range []struct {
		format        string
		tty           bool
		json, colours bool
	}{
		{LogFormatAuto, false, true, false},
		{"", false, true, false},
		{LogFormatAuto, true, false, true},
		{LogFormatConsole, false, false, false},
		{LogFormatConsole, true, false, true},
		{LogFormatJSON, true, true, false},
		{LogFormatJSON, false, true, false},
	} {
		t.Run(tc.format+map[bool]string{true: "/tty", false: "/pipe"}[tc.tty], func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLoggerFormat("info", tc.format, "r1", &buf, tc.tty)
			if err != nil {
				t.Fatal(err)
			}
			log.Info("hello", zap.String("req_id", "abc"))
			line := strings.TrimSuffix(buf.String(), "\n")
			var m map[string]any
			isJSON := json.Unmarshal([]byte(line), &m) == nil
			if isJSON != tc.json {
				t.Fatalf("line %q: JSON %v, want %v", line, isJSON, tc.json)
			}
			if tc.json && (m["msg"] != "hello" || m["req_id"] != "abc" || m["replica"] != "r1" || m["level"] != "info") {
				t.Fatalf("JSON line %v", m)
			}
			if !tc.json && (!strings.Contains(line, "INFO") || !strings.Contains(line, "hello") || !strings.Contains(line, `"req_id": "abc"`)) {
				t.Fatalf("console line %q", line)
			}
			if got := strings.Contains(line, "\x1b["); got != tc.colours {
				t.Fatalf("line %q: colours %v, want %v", line, got, tc.colours)
			}
		})
	}
	if _, err := NewLoggerFormat("info", "xml", "", &bytes.Buffer{}, false); err == nil {
		t.Error("format xml accepted")
	}
}

// TestIsTerminal: a buffer, a file and a pipe are not terminals.
func TestIsTerminal(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, wr := range map[string]io.Writer{"buffer": &bytes.Buffer{}, "file": f, "pipe": w} {
		if IsTerminal(wr) {
			t.Errorf("%s is a terminal", name)
		}
	}
}
