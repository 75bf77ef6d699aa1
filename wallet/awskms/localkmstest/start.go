// Package localkmstest runs a real KMS for tests: local-kms (github.com/nsmithuk/local-kms),
// built from source with the Go tools on first use, serving on a free port of 127.0.0.1 with
// its own data folder; and a TCP proxy in front of it that a test can stall or shut, to see
// what a client does when KMS is slow or down.
package localkmstest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/web3gate/web3gate/internal/testproc"
)

// Region and AccountID are local-kms's: they make its keys' ARNs, and Start points the AWS
// SDK's standard chain at Region.
const (
	Region    = "us-east-1"
	AccountID = "111122223333"
)

// startTimeout bounds a local-kms start: it serves within a few hundred milliseconds.
const startTimeout = 20 * time.Second

// Start builds local-kms if needed, runs it for t with an empty database and returns its
// endpoint URL ("http://127.0.0.1:PORT"); it is stopped when t ends. It also sets, for t's
// duration, fake static credentials and Region in the environment variables that the AWS
// SDK's standard chain reads first, and points the shared config files at nothing, so the
// chain finds those and nothing of the machine's own AWS set-up. Because it sets the
// environment, Start cannot be called from a parallel test (t.Setenv panics there).
//
// A build or start failure fails t: the tests never run without their KMS.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	setEnv(t)
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // another process may take the free port first
		endpoint, err := start(t, bin)
		if err == nil {
			return endpoint
		}
		lastErr = err
	}
	t.Fatal(lastErr)
	return ""
}

// setEnv gives the AWS SDK's standard chain fake credentials and the region, and nothing of
// the machine's AWS configuration.
func setEnv(t testing.TB) {
	none := filepath.Join(t.TempDir(), "no-aws-config")
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID":           "AKIALOCALKMSTEST0000",
		"AWS_SECRET_ACCESS_KEY":       "local-kms-accepts-any-secret",
		"AWS_SESSION_TOKEN":           "",
		"AWS_REGION":                  Region,
		"AWS_DEFAULT_REGION":          Region,
		"AWS_PROFILE":                 "",
		"AWS_CONFIG_FILE":             none,
		"AWS_SHARED_CREDENTIALS_FILE": none,
		"AWS_EC2_METADATA_DISABLED":   "true",
	} {
		t.Setenv(k, v)
	}
}

// Command is the command that runs the local-kms binary bin (from Build) on listen (a
// host:port of 127.0.0.1) with its database in dataDir, Region and AccountID: for a harness
// that manages its processes itself (the benchmark). The caller sets its output and starts,
// waits for and stops it; it answers a POST of TrentService.ListKeys once ready.
func Command(bin, listen, dataDir string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"KMS_LISTEN="+listen,
		"KMS_DATA_PATH="+dataDir,
		"KMS_REGION="+Region,
		"KMS_ACCOUNT_ID="+AccountID,
	)
	return cmd
}

// start runs bin on a free port and waits until it answers; on failure the process is gone.
func start(t testing.TB, bin string) (string, error) {
	port, err := testproc.FreePort()
	if err != nil {
		return "", err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	dir := t.TempDir()
	logPath := filepath.Join(dir, "local-kms.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", fmt.Errorf("local-kms: %w", err)
	}
	cmd := Command(bin, listen, filepath.Join(dir, "data"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return "", fmt.Errorf("local-kms: start %s: %w", bin, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
	}
	endpoint := "http://" + listen
	if err := WaitReady(endpoint, exited); err != nil {
		stop()
		return "", fmt.Errorf("local-kms on %s: %w; its log:\n%s", listen, err, tail(logPath))
	}
	t.Cleanup(stop)
	return endpoint, nil
}

// WaitReady polls endpoint with a ListKeys until it answers 200.
func WaitReady(endpoint string, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		req.Header.Set("X-Amz-Target", "TrentService.ListKeys")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("ListKeys answered %s", resp.Status)
		}
		select {
		case <-exited:
			return fmt.Errorf("exited before answering (last: %v)", err)
		case <-ctx.Done():
			return fmt.Errorf("no answer within %s (last: %v)", startTimeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// tail is the end of the log at path, for a failure message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	const max = 4 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(bytes.TrimSpace(b))
}
