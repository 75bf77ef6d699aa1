//go:build cgo

package pkcs11

import (
	"errors"
	"fmt"
	"os"
	"sync"

	p11 "github.com/miekg/pkcs11"
)

// A module is a PKCS#11 library, loaded and initialised once per process: C_Initialize may
// be called once per process, and every Backend (and test helper) using the same library
// shares its state, the logged-in state of each token included. It is never finalised: a
// process keeps its library until it exits.
type module struct {
	path string
	ctx  *p11.Ctx
	mu   sync.Mutex // serialises C_Initialize
}

var (
	modulesMu sync.Mutex
	modules   = map[string]*module{}
)

// loadModule returns the module at path, loading and initialising it on first use.
func loadModule(path string) (*module, error) {
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if m := modules[path]; m != nil {
		return m, nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("PKCS#11 module: %w", err)
	}
	ctx := p11.New(path)
	if ctx == nil {
		return nil, fmt.Errorf("PKCS#11 module %s: cannot load it (dlopen or C_GetFunctionList failed: "+
			"not a PKCS#11 library, another architecture, or a library it needs is missing)", path)
	}
	m := &module{path: path, ctx: ctx}
	if err := m.initialize(); err != nil {
		ctx.Destroy()
		return nil, err
	}
	modules[path] = m
	return m, nil
}

// initialize calls C_Initialize (letting the library use the OS's locks: the pool calls it
// from many threads). CKR_CRYPTOKI_ALREADY_INITIALIZED is success: another user in this
// process initialised it. It is called again when the library answers
// CKR_CRYPTOKI_NOT_INITIALIZED (someone in the process finalised it).
func (m *module) initialize() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	err := m.ctx.Initialize()
	if err != nil && !errors.Is(err, p11.Error(p11.CKR_CRYPTOKI_ALREADY_INITIALIZED)) {
		return fmt.Errorf("PKCS#11 module %s: C_Initialize: %w", m.path, err)
	}
	return nil
}
