package softhsmtest

import (
	"fmt"
	"os"
	"strings"
)

// InstallHint is the command that installs SoftHSM2 on Debian and Ubuntu.
const InstallHint = "apt-get install -y softhsm2 (as root; scripts/softhsm.sh does it)"

// PINEnv is the pinEnv of the configurations Token returns: a variable that must stay unset,
// so that the PIN comes from the token's PIN file whatever the developer's environment holds.
const PINEnv = "WEB3GATE_SOFTHSMTEST_PIN"

// modulePaths are where distributions put SoftHSM2's PKCS#11 library.
var modulePaths = []string{
	"/usr/lib/softhsm/libsofthsm2.so",                   // Debian, Ubuntu
	"/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",  // Debian multiarch
	"/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so", // Debian multiarch
	"/usr/lib64/pkcs11/libsofthsm2.so",                  // Fedora, RHEL
	"/usr/local/lib/softhsm/libsofthsm2.so",             // built from source
	"/opt/homebrew/lib/softhsm/libsofthsm2.so",          // Homebrew
}

// FindModule returns the path of SoftHSM2's PKCS#11 library, or an error saying how to
// install it. It needs no cgo: a harness that makes its tokens with softhsm2-util in a
// process of its own (the benchmark) uses it too.
func FindModule() (string, error) {
	for _, p := range modulePaths {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("SoftHSM2 is not installed (no libsofthsm2.so in %s); install it: %s",
		strings.Join(modulePaths, ", "), InstallHint)
}
