#!/usr/bin/env bash
# deploy-check.sh: checks the deployment example in deploy/ without a Docker engine.
#  - docker-compose accepts deploy/compose.yaml with deploy/.env.example's values, and refuses
#    it when a required secret is not set;
#  - haproxy accepts deploy/haproxy.cfg.
# Debian's docker-compose and haproxy packages are installed when missing (their services are
# not started). Go tests of the root package go further: `web3gate config check` on
# deploy/web3gate.yaml (TestDeployConfig), and haproxy.cfg in front of two web3gate servers
# (TestDeployLoadBalancer, which needs the haproxy installed here).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

missing=()
command -v docker-compose >/dev/null || missing+=(docker-compose)
command -v haproxy >/dev/null || missing+=(haproxy)
if [ "${#missing[@]}" -gt 0 ]; then
	scripts/apt-install.sh "${missing[@]}"
fi

# Only the example's values: a deploy/.env beside it, and variables of the same names in the
# environment of this run, must not decide the outcome.
vars=$(sed -n 's/^\([A-Z_][A-Z0-9_]*\)=.*/\1/p' deploy/.env.example)
unset_args=()
for v in $vars; do unset_args+=(-u "$v"); done

docker_compose() { env "${unset_args[@]}" docker-compose -f deploy/compose.yaml "$@"; }

docker_compose --env-file deploy/.env.example config -q
echo "deploy-check: docker-compose accepts deploy/compose.yaml"

empty=$(mktemp)
trap 'rm -f "$empty"' EXIT
if out=$(docker_compose --env-file "$empty" config -q 2>&1); then
	echo "deploy-check: docker-compose accepted deploy/compose.yaml without any secret set" >&2
	exit 1
fi
case $out in
*"set POSTGRES_PASSWORD in deploy/.env"*) ;;
*)
	echo "deploy-check: without secrets docker-compose said: $out" >&2
	exit 1
	;;
esac
echo "deploy-check: docker-compose refuses deploy/compose.yaml without its secrets"

# The replicas' names resolve only on the compose network: HAProxy warns about them here.
haproxy -c -q -f deploy/haproxy.cfg
echo "deploy-check: haproxy accepts deploy/haproxy.cfg"
