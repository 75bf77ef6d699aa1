//go:build nodevchain

package devchain

import (
	"errors"
	"testing"
)

// Run with: go test -tags nodevchain ./devchain
func TestStartWithoutDevChain(t *testing.T) {
	c, err := Start(Config{}, Deps{})
	if c != nil || !errors.Is(err, ErrNotBuilt) {
		t.Fatalf("Start = %v, %v; want nil, ErrNotBuilt", c, err)
	}
	accounts, err := DevAccounts(2)
	if err != nil || len(accounts) != 2 {
		t.Fatalf("DevAccounts(2) = %d accounts, %v: the dev accounts do not need the chain", len(accounts), err)
	}
}
