#!/usr/bin/env bash
# softhsm.sh: make sure SoftHSM2 (Debian's softhsm2: libsofthsm2.so, softhsm2-util) is
# installed, for the PKCS#11 tests; installs it with apt-get (as root) when missing. Prints
# the path of the PKCS#11 library. The tests make their own tokens (package
# wallet/pkcs11/softhsmtest): nothing is initialised here.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
# Where distributions put the library; softhsmtest looks in the same places.
paths=(
	/usr/lib/softhsm/libsofthsm2.so
	/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so
	/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so
	/usr/lib64/pkcs11/libsofthsm2.so
	/usr/local/lib/softhsm/libsofthsm2.so
	/opt/homebrew/lib/softhsm/libsofthsm2.so
)

find_module() {
	for p in "${paths[@]}"; do
		if [ -e "$p" ]; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

if module="$(find_module)"; then
	echo "$module"
	exit 0
fi
echo "softhsm: SoftHSM2 is not installed; installing Debian's softhsm2" >&2
"$here/apt-install.sh" softhsm2
if ! module="$(find_module)"; then
	echo "softhsm: softhsm2 installed, but no libsofthsm2.so in ${paths[*]}" >&2
	exit 1
fi
echo "$module"
