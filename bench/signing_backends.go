//go:build linux

// (f) on the hardware backends: the key of the signing account on a SoftHSM2 token or in a
// local-kms, made for each round.

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/web3gate/web3gate/internal/testproc"
	"github.com/web3gate/web3gate/wallet"
	"github.com/web3gate/web3gate/wallet/awskms/localkmstest"
	"github.com/web3gate/web3gate/wallet/pkcs11/softhsmtest"
)

// keyRound is the key backend of one round of a hardware (f): what the config adds, the
// environment web3gate and its CLI run with, and how to stop what the round started.
type keyRound struct {
	sets [][2]string // config keys (full paths) and values
	env  [][2]string // environment variables for the round
	stop func()
}

// backendBench names what each hardware (f) signs with, for the report.
var backendBench = map[string]string{
	wallet.BackendPKCS11: "SoftHSM2",
	wallet.BackendAWSKMS: "local-kms",
}

// fundValue is what the round's hardware account gets from a dev account before the load:
// 100 ether, far above what the signatures of a round hold in flight (2.1e13 wei each).
const fundValue = "0x56bc75e2d63100000"

// startKeyBackend makes a round's key backend in dir: a SoftHSM2 token of its own
// (softhsm2-util, its own configuration and token folder), or a local-kms process on a free
// port with its database in dir.
func startKeyBackend(backend, dir string) (*keyRound, error) {
	switch backend {
	case wallet.BackendPKCS11:
		return softHSMRound(dir)
	case wallet.BackendAWSKMS:
		return localKMSRound(dir)
	}
	return nil, fmt.Errorf("no bench set-up for the key backend %q", backend)
}

func softHSMRound(dir string) (*keyRound, error) {
	module, err := softhsmtest.FindModule()
	if err != nil {
		return nil, err
	}
	tokens := filepath.Join(dir, "softhsm-tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "softhsm2.conf")
	if err := os.WriteFile(conf, []byte("directories.tokendir = "+tokens+"\nobjectstore.backend = file\nlog.level = ERROR\n"), 0o600); err != nil {
		return nil, err
	}
	pin, so := randomHex(8), randomHex(8)
	pinFile := filepath.Join(dir, "pkcs11-pin")
	if err := os.WriteFile(pinFile, []byte(pin+"\n"), 0o600); err != nil {
		return nil, err
	}
	const label = "web3gate-bench"
	cmd := exec.Command("softhsm2-util", "--init-token", "--free", "--label", label, "--so-pin", so, "--pin", pin)
	cmd.Env = append(os.Environ(), "SOFTHSM2_CONF="+conf)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("softhsm2-util --init-token: %w\n%s", err, indent(string(out)))
	}
	return &keyRound{
		sets: [][2]string{
			{"wallet.pkcs11.module", module},
			{"wallet.pkcs11.tokenLabel", label},
			{"wallet.pkcs11.pinFile", pinFile},
		},
		env:  [][2]string{{"SOFTHSM2_CONF", conf}},
		stop: func() {},
	}, nil
}

func localKMSRound(dir string) (*keyRound, error) {
	bin, err := localkmstest.Build()
	if err != nil {
		return nil, err
	}
	port, err := testproc.FreePort()
	if err != nil {
		return nil, err
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	logFile, err := os.Create(filepath.Join(dir, "local-kms.log"))
	if err != nil {
		return nil, err
	}
	cmd := localkmstest.Command(bin, listen, filepath.Join(dir, "local-kms"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("local-kms: %w", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	stop := func() { _ = cmd.Process.Kill(); <-exited }
	endpoint := "http://" + listen
	if err := localkmstest.WaitReady(endpoint, exited); err != nil {
		stop()
		return nil, fmt.Errorf("local-kms on %s: %w", listen, err)
	}
	none := filepath.Join(dir, "no-aws-config")
	return &keyRound{
		sets: [][2]string{
			{"wallet.awskms.enabled", "true"},
			{"wallet.awskms.region", localkmstest.Region},
			{"wallet.awskms.endpoint", endpoint},
		},
		// The SDK's standard chain finds these fake credentials and nothing of the
		// machine's own AWS set-up.
		env: [][2]string{
			{"AWS_ACCESS_KEY_ID", "AKIALOCALKMSBENCH000"},
			{"AWS_SECRET_ACCESS_KEY", "local-kms-accepts-any-secret"},
			{"AWS_SESSION_TOKEN", ""},
			{"AWS_REGION", localkmstest.Region},
			{"AWS_DEFAULT_REGION", localkmstest.Region},
			{"AWS_PROFILE", ""},
			{"AWS_CONFIG_FILE", none},
			{"AWS_SHARED_CREDENTIALS_FILE", none},
			{"AWS_EC2_METADATA_DISABLED", "true"},
		},
		stop: stop,
	}, nil
}

// setEnv sets the round's environment for this process (web3gate and the CLI inherit it)
// and returns what puts the previous one back.
func (k *keyRound) setEnv() func() {
	type prev struct {
		v   string
		had bool
	}
	saved := map[string]prev{}
	for _, kv := range k.env {
		v, had := os.LookupEnv(kv[0])
		saved[kv[0]] = prev{v, had}
		os.Setenv(kv[0], kv[1])
	}
	return func() {
		for name, p := range saved {
			if p.had {
				os.Setenv(name, p.v)
			} else {
				os.Unsetenv(name)
			}
		}
	}
}

// newHardwareAccount makes the round's account of the dev principal with the CLI
// (`accounts new --backend`), as an operator would, on the config at cfgPath; it returns
// its address.
func newHardwareAccount(bin, cfgPath, backend string) (common.Address, error) {
	cmd := exec.Command(bin, "accounts", "new", "--owner", "dev", "--backend", backend, "--label", "bench", "--config", cfgPath)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return common.Address{}, fmt.Errorf("web3gate accounts new --backend %s: %w\n%s", backend, err, indent(stderr.String()))
	}
	s := strings.TrimSpace(stdout.String())
	if !common.IsHexAddress(s) {
		return common.Address{}, fmt.Errorf("web3gate accounts new --backend %s printed %q, want an address", backend, s)
	}
	return common.HexToAddress(s), nil
}

// fund sends fundValue from the dev account `from` to `to` through web3gate at url and waits
// until it is mined.
func fund(ctx context.Context, url string, headers [][2]string, from string, to common.Address) error {
	body := `{"jsonrpc":"2.0","id":1,"method":"eth_sendTransaction","params":[{"from":"` + from + `","to":"` + to.Hex() +
		`","value":"` + fundValue + `"}]}`
	res, err := rpcResult(&target{url: url, body: body, headers: headers})
	if err != nil {
		return fmt.Errorf("fund %s: %w", to.Hex(), err)
	}
	var hash string
	if err := json.Unmarshal(res, &hash); err != nil {
		return fmt.Errorf("fund %s: eth_sendTransaction answered %s", to.Hex(), res)
	}
	receipt := `{"jsonrpc":"2.0","id":1,"method":"eth_getTransactionReceipt","params":["` + hash + `"]}`
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		res, err := rpcResult(&target{url: url, body: receipt, headers: headers})
		if err != nil {
			return fmt.Errorf("fund %s: %w", to.Hex(), err)
		}
		if !bytes.Equal(res, []byte("null")) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return fmt.Errorf("fund %s: %s not mined within 30s", to.Hex(), hash)
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// startHardwareSigner starts the web3gate of a round of sp on its hardware backend: the
// backend, an account made on it with the CLI, web3gate on SQLite, the account funded from
// sp.account; sp.account and t's body and script become the new account's. cleanup stops the
// backend and puts the environment back.
func startHardwareSigner(ctx context.Context, cs *children, cfg runConfig, env signEnv, sp *signSpec, name, dir string, t *target) (servers []*child, cleanup func() error, err error) {
	k, err := startKeyBackend(sp.backend, dir)
	if err != nil {
		return nil, func() error { return nil }, err
	}
	restore := k.setEnv()
	cleanup = func() error { k.stop(); restore(); return nil }
	config := signConfig(env.root, dir, sp.settings, k.sets...)
	cfgPath, err := config(0, 0) // for the CLI; the server's ports are set when it starts
	if err != nil {
		return nil, cleanup, err
	}
	addr, err := newHardwareAccount(env.bin, cfgPath, sp.backend)
	if err != nil {
		return nil, cleanup, err
	}
	c, api, admin, err := startWeb3gate(ctx, cs, cfg.serverCPUs, env.bin, name, config)
	if err != nil {
		return nil, cleanup, err
	}
	t.url, t.admin, t.servers = api+"/v1/web3/mainnet", admin, []*child{c}
	servers = []*child{c}
	if err := fund(ctx, t.url, t.headers, sp.account, addr); err != nil {
		return servers, cleanup, err
	}
	sp.account = addr.Hex()
	t.body = txBody(sp.method, sp.account)
	if t.script, err = writeScript(dir, t); err != nil {
		return servers, cleanup, err
	}
	return servers, cleanup, nil
}
