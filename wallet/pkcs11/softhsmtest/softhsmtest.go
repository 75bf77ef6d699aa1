//go:build cgo

// Package softhsmtest makes SoftHSM2 tokens for tests: a fresh token per test, and a check
// that a key's bytes appear in no file of a directory.
//
// SoftHSM reads its configuration (SOFTHSM2_CONF) once, at C_Initialize, and a process
// initialises a PKCS#11 library once; and it does not see tokens that another process
// (softhsm2-util) creates after that. So one configuration and token directory serve the
// whole test binary: made on first use in os.TempDir() as web3gate-softhsm-<pid>-<random>,
// SOFTHSM2_CONF set for the process (child processes, such as a web3gate started by e2e
// tests, inherit it), and each test's token is made in this process, through PKCS#11
// (C_InitToken on the free slot, C_InitPIN), so that the library already loaded sees it.
// Each token's files are removed when its test ends; the directory itself outlives the
// process (no hook runs at a test binary's exit without a TestMain) and is removed by the
// next test binary that uses this package, once its process has exited.
package softhsmtest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"

	p11 "github.com/miekg/pkcs11"

	"github.com/web3gate/web3gate/wallet/pkcs11"
)

var (
	mu      sync.Mutex // serialises the set-up and token creation
	env     *setup
	envErr  error
	counter int
)

// setup is the process-wide SoftHSM2 set-up.
type setup struct {
	module   string
	dir      string // holds softhsm2.conf and tokens/
	conf     string
	tokenDir string
	ctx      *p11.Ctx
}

// Module returns the path of SoftHSM2's PKCS#11 library, failing t when it is not installed.
func Module(t testing.TB) string {
	t.Helper()
	return get(t).module
}

// ConfFile returns the SoftHSM2 configuration of this process (what SOFTHSM2_CONF names), for
// a child process started with an environment of its own.
func ConfFile(t testing.TB) string {
	t.Helper()
	return get(t).conf
}

// TokenDir returns the directory holding the tokens of this process (each in a subdirectory).
func TokenDir(t testing.TB) string {
	t.Helper()
	return get(t).tokenDir
}

// get returns the process-wide set-up, making it on first use.
func get(t testing.TB) *setup {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	if env == nil && envErr == nil {
		env, envErr = newSetup()
	}
	if envErr != nil {
		t.Fatalf("SoftHSM2: %v", envErr)
	}
	return env
}

func newSetup() (*setup, error) {
	module, err := FindModule()
	if err != nil {
		return nil, err
	}
	if v, ok := os.LookupEnv(PINEnv); ok {
		return nil, fmt.Errorf("the environment variable %s must not be set in tests (%d bytes)", PINEnv, len(v))
	}
	sweep()
	dir, err := os.MkdirTemp("", fmt.Sprintf("web3gate-softhsm-%d-", os.Getpid()))
	if err != nil {
		return nil, err
	}
	s := &setup{module: module, dir: dir, conf: filepath.Join(dir, "softhsm2.conf"), tokenDir: filepath.Join(dir, "tokens")}
	if err := os.Mkdir(s.tokenDir, 0o700); err != nil {
		return nil, err
	}
	conf := "directories.tokendir = " + s.tokenDir + "\nobjectstore.backend = file\nlog.level = ERROR\n" +
		"slots.removable = false\n"
	if err := os.WriteFile(s.conf, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	// For the whole process: the library reads it once, at C_Initialize, whichever test
	// comes first.
	if err := os.Setenv("SOFTHSM2_CONF", s.conf); err != nil {
		return nil, err
	}
	s.ctx = p11.New(module)
	if s.ctx == nil {
		return nil, fmt.Errorf("cannot load %s", module)
	}
	if err := s.initialize(); err != nil {
		return nil, err
	}
	return s, nil
}

// initialize initialises the library, unless done already in this process (by a backend, or
// by this package before a test finalised it).
func (s *setup) initialize() error {
	err := s.ctx.Initialize()
	if err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		return fmt.Errorf("C_Initialize: %w", err)
	}
	return nil
}

// staleDir matches the set-up directories of test processes.
var staleDir = regexp.MustCompile(`^web3gate-softhsm-(\d+)-`)

// sweep removes the set-up directories left by test processes that have exited.
func sweep() {
	entries, _ := os.ReadDir(os.TempDir())
	for _, e := range entries {
		m := staleDir.FindStringSubmatch(e.Name())
		if m == nil || !e.IsDir() {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// Token makes a fresh SoftHSM2 token for t, with a unique label, a random user PIN in a
// 0600 file of t.TempDir(), and returns the configuration of a backend using it (defaults
// set). The token's files are removed when t ends (close the backends using it first: a
// t.Cleanup registered after Token runs before Token's). It fails t when SoftHSM2 is not
// installed, saying how to install it.
func Token(t testing.TB) pkcs11.Config {
	t.Helper()
	s := get(t)
	userPIN, soPIN := randomHex(t, 8), randomHex(t, 8)
	pinFile := filepath.Join(t.TempDir(), "pin")
	if err := os.WriteFile(pinFile, []byte(userPIN+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	counter++
	label := fmt.Sprintf("w3g-%d-%s-%s", counter, randomHex(t, 2), t.Name())
	if len(label) > 32 {
		label = label[:32]
	}
	before := tokenDirs(s.tokenDir)
	if err := s.initToken(label, soPIN, userPIN); err != nil {
		t.Fatalf("SoftHSM2: make token %q: %v", label, err)
	}
	for d := range tokenDirs(s.tokenDir) {
		if !before[d] {
			t.Cleanup(func() { os.RemoveAll(filepath.Join(s.tokenDir, d)) })
		}
	}
	cfg := pkcs11.Config{Module: s.module, TokenLabel: label, PINEnv: PINEnv, PINFile: pinFile}
	cfg.SetDefaults()
	return cfg
}

// initToken initialises the free slot's token as label, with the SO and user PINs.
func (s *setup) initToken(label, soPIN, userPIN string) error {
	if err := s.initialize(); err != nil {
		return err
	}
	slots, err := s.ctx.GetSlotList(true)
	if err != nil {
		return fmt.Errorf("C_GetSlotList: %w", err)
	}
	free, found := uint(0), false
	for _, slot := range slots {
		info, err := s.ctx.GetTokenInfo(slot)
		if err == nil && info.Flags&p11.CKF_TOKEN_INITIALIZED == 0 {
			free, found = slot, true
			break
		}
	}
	if !found {
		return errors.New("no free slot")
	}
	if err := s.ctx.InitToken(free, soPIN, label); err != nil {
		return fmt.Errorf("C_InitToken: %w", err)
	}
	sh, err := s.ctx.OpenSession(free, p11.CKF_SERIAL_SESSION|p11.CKF_RW_SESSION)
	if err != nil {
		return fmt.Errorf("C_OpenSession: %w", err)
	}
	defer s.ctx.CloseSession(sh)
	if err := s.ctx.Login(sh, p11.CKU_SO, soPIN); err != nil {
		return fmt.Errorf("C_Login (SO): %w", err)
	}
	if err := s.ctx.InitPIN(sh, userPIN); err != nil {
		return fmt.Errorf("C_InitPIN: %w", err)
	}
	if err := s.ctx.Logout(sh); err != nil {
		return fmt.Errorf("C_Logout: %w", err)
	}
	return nil
}

// tokenDirs returns the names of the token directories (one per token) in dir.
func tokenDirs(dir string) map[string]bool {
	entries, _ := os.ReadDir(dir)
	m := make(map[string]bool, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			m[e.Name()] = true
		}
	}
	return m
}

func randomHex(t testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
