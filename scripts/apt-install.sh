#!/usr/bin/env bash
# apt-install.sh PACKAGE...: install Debian packages for the tests, non-interactively, without
# starting their services (a package such as redis-server or postgresql would otherwise start
# its own daemon on the port the tests want). Fails loudly: a package that cannot be installed
# ends the caller with a non-zero status and the apt output above the message.
set -euo pipefail

[ "$#" -gt 0 ] || { echo "usage: $0 PACKAGE..." >&2; exit 2; }
if [ "$(id -u)" -ne 0 ]; then
	echo "apt-install: installing $* needs root (apt-get); install them yourself and run again" >&2
	exit 1
fi
command -v apt-get >/dev/null || { echo "apt-install: no apt-get here; install $* yourself" >&2; exit 1; }

export DEBIAN_FRONTEND=noninteractive
# Debian's invoke-rc.d and deb-systemd-invoke ask /usr/sbin/policy-rc.d whether a package may
# start its service; 101 means no. Containers usually have one already; otherwise one is put
# in place for this install only.
guard=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
	guard=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\n# web3gate scripts/apt-install.sh: no service starts during this install\nexit 101\n' >"$guard"
	chmod 755 "$guard"
	trap 'rm -f "$guard"' EXIT
fi

echo "apt-install: installing $*" >&2
if ! apt-get update -q; then
	echo "apt-install: apt-get update failed; cannot install $*" >&2
	exit 1
fi
if ! apt-get install -y -q --no-install-recommends "$@"; then
	echo "apt-install: apt-get install $* failed" >&2
	exit 1
fi
