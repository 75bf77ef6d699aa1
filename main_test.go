package main

import (
	"testing"

	"github.com/web3gate/web3gate/internal/leaktest"
)

// TestMain fails the package when a goroutine outlives the servers the tests started and
// stopped (every test stops its server through run's context).
func TestMain(m *testing.M) { leaktest.Main(m) }
