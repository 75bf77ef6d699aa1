package awskms

import (
	"testing"

	"github.com/web3gate/web3gate/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
