#!/usr/bin/env bash
# test-engines.sh start|stop|selftest: the PostgreSQL and Redis that `make test` needs.
#
# start  For each engine, checks whether something answers on its loopback port (PostgreSQL
#        127.0.0.1:5432, Redis 127.0.0.1:6379). If so it is used as it is (PostgreSQL must
#        take user postgres without a password, as the tests connect). If not, installs the
#        Debian package when the binaries are missing (postgresql, redis-server) and starts a
#        private instance in a directory of its own under WEB3GATE_ENGINES_DIR, recording that
#        it did. Running it again changes nothing.
# stop   Stops the instances that start recorded under WEB3GATE_ENGINES_DIR, and only those,
#        and removes their directories. An engine that was already answering is left alone.
# selftest
#        Proves the private-instance path on free ports in a directory of its own: start,
#        check both engines answer (and a second start changes nothing), stop, check they are
#        gone. It installs nothing when the binaries exist.
#
# Environment (defaults in brackets):
#   WEB3GATE_ENGINES_PG_PORT [5432]      WEB3GATE_ENGINES_REDIS_PORT [6379]
#   WEB3GATE_ENGINES_DIR [${TMPDIR:-/tmp}/web3gate-test-engines]
#   WEB3GATE_ENGINES_TIMEOUT [60]        seconds an engine gets to come up or stop
#   WEB3GATE_ENGINES_PG_MAX_CONNECTIONS [300]
#   WEB3GATE_ENGINES_PG_BIN              directory of initdb, pg_ctl, postgres [found]
#   WEB3GATE_ENGINES_PG_USER             Unix user running PostgreSQL when run as root
#                                        [postgres if it exists, else web3gate-pg, created]
# When WEB3GATE_TEST_POSTGRES (or WEB3GATE_TEST_REDIS) is set and the engine's port is not,
# the tests use that engine and this script leaves it to whoever set it.
set -euo pipefail

HOST=127.0.0.1
SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BASE=${WEB3GATE_ENGINES_DIR:-${TMPDIR:-/tmp}/web3gate-test-engines}
TIMEOUT=${WEB3GATE_ENGINES_TIMEOUT:-60}
PG_MAX_CONNECTIONS=${WEB3GATE_ENGINES_PG_MAX_CONNECTIONS:-300}

log() { echo "test-engines: $*" >&2; }
die() {
	echo "test-engines: ERROR: $*" >&2
	exit 1
}

for v in TIMEOUT PG_MAX_CONNECTIONS; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive whole number, got '${!v}'"
done
case $BASE in
/*) ;;
*) BASE=$PWD/$BASE ;;
esac
[[ $BASE =~ ^[A-Za-z0-9/._-]+$ ]] || die "WEB3GATE_ENGINES_DIR '$BASE': only letters, digits and / . _ - (it goes into server options)"

# Which engines this run manages: an explicit port always; the default port unless the tests
# were pointed elsewhere.
PG_PORT=${WEB3GATE_ENGINES_PG_PORT:-}
if [ -z "$PG_PORT" ] && [ -z "${WEB3GATE_TEST_POSTGRES:-}" ]; then PG_PORT=5432; fi
REDIS_PORT=${WEB3GATE_ENGINES_REDIS_PORT:-}
if [ -z "$REDIS_PORT" ] && [ -z "${WEB3GATE_TEST_REDIS:-}" ]; then REDIS_PORT=6379; fi
for v in PG_PORT REDIS_PORT; do
	[ -z "${!v}" ] || [[ ${!v} =~ ^[1-9][0-9]{0,4}$ && ${!v} -le 65535 ]] || die "$v must be a TCP port, got '${!v}'"
done

# port_open PORT: something accepts TCP connections on HOST:PORT.
port_open() { timeout 3 bash -c "exec 3<>/dev/tcp/$HOST/$1" 2>/dev/null; }

# wait_for CHECK...: runs CHECK until it succeeds, for at most TIMEOUT seconds.
wait_for() {
	local deadline=$((SECONDS + TIMEOUT))
	until "$@"; do
		[ "$SECONDS" -lt "$deadline" ] || return 1
		sleep 0.2
	done
}

# ---- PostgreSQL ----

PG_BIN=""

# find_pg_bin: the directory holding initdb, pg_ctl and postgres: WEB3GATE_ENGINES_PG_BIN,
# else PATH, else Debian's /usr/lib/postgresql/<version>/bin (newest version first).
find_pg_bin() {
	local d
	if [ -n "${WEB3GATE_ENGINES_PG_BIN:-}" ]; then
		PG_BIN=$WEB3GATE_ENGINES_PG_BIN
		return 0
	fi
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null && command -v postgres >/dev/null; then
		PG_BIN=$(dirname "$(readlink -f "$(command -v pg_ctl)")")
		[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/postgres" ] && return 0
	fi
	while read -r d; do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			PG_BIN=$d
			return 0
		fi
	done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -V -r)
	PG_BIN=""
	return 1
}

# pg_tool NAME: a PostgreSQL client program, from PG_BIN or PATH.
pg_tool() {
	if [ -n "$PG_BIN" ] && [ -x "$PG_BIN/$1" ]; then
		echo "$PG_BIN/$1"
	elif command -v "$1" >/dev/null; then
		command -v "$1"
	else
		return 1
	fi
}

# pg_answers PORT: something accepts connections on PORT (PostgreSQL or not: check_external_pg
# tells).
pg_answers() { port_open "$1"; }

# pg_ready PORT: PostgreSQL on PORT accepts connections.
pg_ready() {
	local isready
	if isready=$(pg_tool pg_isready); then
		"$isready" -q -h "$HOST" -p "$1" -t 3
	else
		port_open "$1"
	fi
}

# pg_user: the Unix user that runs a private PostgreSQL, which refuses to run as root.
pg_user() {
	if [ "$(id -u)" -ne 0 ]; then
		id -un
	elif [ -n "${WEB3GATE_ENGINES_PG_USER:-}" ]; then
		echo "$WEB3GATE_ENGINES_PG_USER"
	elif id -u postgres >/dev/null 2>&1; then
		echo postgres
	else
		echo web3gate-pg
	fi
}

# as_user USER CMD...: CMD as USER (runuser when that is not who runs this script).
as_user() {
	local u=$1
	shift
	if [ "$u" = "$(id -un)" ]; then
		"$@"
	else
		(cd / && runuser -u "$u" -- "$@")
	fi
}

# check_external_pg PORT: a PostgreSQL this script did not start must take the tests' login.
check_external_pg() {
	local psql
	psql=$(pg_tool psql) || return 0
	if ! PGCONNECT_TIMEOUT=5 "$psql" -X -w -q -h "$HOST" -p "$1" -U postgres -d postgres -Atc 'SELECT 1' >/dev/null; then
		die "something answers on $HOST:$1 but user postgres cannot log in there without a password, as the tests do; give them trust auth for postgres on $HOST, or point the tests elsewhere with WEB3GATE_TEST_POSTGRES (and WEB3GATE_ENGINES_PG_PORT at a free port to have one started)"
	fi
}

start_pg() {
	local port=$1 dir=$BASE/pg-$1 user initdb_log
	if [ -f "$dir/started" ] && pg_ready "$port"; then
		log "PostgreSQL on $HOST:$port: already running (started by this script, $dir)"
		return 0
	fi
	if [ ! -f "$dir/started" ] && pg_answers "$port"; then
		check_external_pg "$port"
		log "PostgreSQL on $HOST:$port: already answering, used as it is"
		return 0
	fi
	if [ -e "$dir" ]; then
		log "PostgreSQL on $HOST:$port: removing the remains of an earlier run ($dir)"
		stop_pg "$dir"
	fi
	find_pg_bin || die "PostgreSQL binaries (initdb, pg_ctl, postgres) not found on PATH nor under /usr/lib/postgresql/*/bin, even after installing the postgresql package"
	user=$(pg_user)
	if ! id -u "$user" >/dev/null 2>&1; then
		log "creating the system user $user to run PostgreSQL (it refuses to run as root)"
		useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$user" ||
			die "useradd $user failed"
	fi
	mkdir -p "$BASE"
	chmod 755 "$BASE"
	mkdir -m 700 "$dir"
	chown "$user" "$dir" || die "chown $dir to $user failed"
	as_user "$user" test -w "$dir" ||
		die "user $user cannot write to $dir (a parent directory shuts it out); set WEB3GATE_ENGINES_DIR to a directory it can reach"
	printf 'pg_bin=%s\nuser=%s\nport=%s\n' "$PG_BIN" "$user" "$port" >"$dir/started"

	log "PostgreSQL on $HOST:$port: starting a private instance ($PG_BIN, user $user, $dir)"
	initdb_log=$dir/initdb.log
	if ! as_user "$user" "$PG_BIN/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C --no-sync \
		</dev/null >"$initdb_log" 2>&1; then
		tail -n 20 "$initdb_log" >&2 || true
		die "initdb failed (log above, $initdb_log)"
	fi
	# fsync and the rest off: a test database that a crash may lose; max_connections leaves
	# room for several servers with their pools and parallel test packages.
	if ! as_user "$user" "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$TIMEOUT" \
		-o "-k $dir -h $HOST -p $port -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=$PG_MAX_CONNECTIONS" \
		start </dev/null >/dev/null 2>"$dir/pg_ctl.log"; then
		tail -n 20 "$dir/pg_ctl.log" "$dir/postgres.log" >&2 || true
		die "PostgreSQL on $HOST:$port failed to start or was not ready within ${TIMEOUT}s (logs above, $dir)"
	fi
	wait_for pg_ready "$port" ||
		die "PostgreSQL on $HOST:$port started but does not accept connections within ${TIMEOUT}s ($dir/postgres.log)"
	log "PostgreSQL on $HOST:$port: ready"
}

# stop_pg DIR: stops the instance whose directory is DIR and removes DIR.
stop_pg() {
	local dir=$1 pg_bin="" user="" port="" k v pid
	if [ -f "$dir/started" ]; then
		while IFS='=' read -r k v; do
			case $k in
			pg_bin) pg_bin=$v ;;
			user) user=$v ;;
			port) port=$v ;;
			esac
		done <"$dir/started"
	fi
	if [ -f "$dir/data/postmaster.pid" ] && [ -n "$pg_bin" ] && [ -n "$user" ]; then
		log "PostgreSQL on $HOST:$port: stopping the private instance ($dir)"
		if ! as_user "$user" "$pg_bin/pg_ctl" -D "$dir/data" -m fast -w -t "$TIMEOUT" stop </dev/null >/dev/null 2>&1; then
			pid=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || true)
			if [[ $pid =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$dir/data"; then
				log "pg_ctl stop failed; killing postmaster $pid"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
	fi
	rm -rf "$dir"
}

# ---- Redis ----

redis_ping() { [ "$(timeout 3 redis-cli -h "$HOST" -p "$1" PING 2>/dev/null)" = PONG ]; }

start_redis() {
	local port=$1 dir=$BASE/redis-$1
	if [ -f "$dir/started" ] && redis_ping "$port"; then
		log "Redis on $HOST:$port: already running (started by this script, $dir)"
		return 0
	fi
	if [ ! -f "$dir/started" ] && port_open "$port"; then
		if command -v redis-cli >/dev/null && ! redis_ping "$port"; then
			die "something answers on $HOST:$port but not PING with PONG (a password, or not Redis); point the tests elsewhere with WEB3GATE_TEST_REDIS (and WEB3GATE_ENGINES_REDIS_PORT at a free port to have one started)"
		fi
		log "Redis on $HOST:$port: already answering, used as it is"
		return 0
	fi
	if [ -e "$dir" ]; then
		log "Redis on $HOST:$port: removing the remains of an earlier run ($dir)"
		stop_redis "$dir"
	fi
	command -v redis-server >/dev/null && command -v redis-cli >/dev/null ||
		die "redis-server and redis-cli not found on PATH, even after installing the redis-server package"
	mkdir -p "$BASE"
	chmod 755 "$BASE"
	mkdir -m 700 "$dir"
	printf 'port=%s\n' "$port" >"$dir/started"
	log "Redis on $HOST:$port: starting a private instance ($dir)"
	if ! redis-server --bind "$HOST" --port "$port" --save '' --appendonly no --daemonize yes \
		--pidfile "$dir/redis.pid" --logfile "$dir/redis.log" --dir "$dir" </dev/null >/dev/null 2>&1; then
		tail -n 20 "$dir/redis.log" >&2 || true
		die "redis-server on $HOST:$port did not start (log above, $dir/redis.log)"
	fi
	if ! wait_for redis_ping "$port"; then
		tail -n 20 "$dir/redis.log" >&2 || true
		die "Redis on $HOST:$port does not answer PING within ${TIMEOUT}s (log above, $dir/redis.log)"
	fi
	log "Redis on $HOST:$port: ready"
}

# redis_pid DIR: the pid in DIR's pid file while that process is a live redis-server (an
# exited one waiting to be reaped by init does not count).
redis_pid() {
	local pid state
	pid=$(cat "$1/redis.pid" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] && [ -r "/proc/$pid/comm" ] && grep -q '^redis-server' "/proc/$pid/comm" || return 1
	state=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ] && echo "$pid"
}

redis_gone() { ! redis_pid "$1" >/dev/null; }

# stop_redis DIR: stops the instance whose directory is DIR and removes DIR.
stop_redis() {
	local dir=$1 port="" k v pid
	if [ -f "$dir/started" ]; then
		while IFS='=' read -r k v; do
			[ "$k" = port ] && port=$v
		done <"$dir/started"
	fi
	if pid=$(redis_pid "$dir"); then
		log "Redis on $HOST:$port: stopping the private instance ($dir)"
		[ -n "$port" ] && timeout 10 redis-cli -h "$HOST" -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
		if ! wait_for redis_gone "$dir"; then
			log "SHUTDOWN did not stop Redis; killing $pid"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -rf "$dir"
}

# ---- commands ----

cmd_start() {
	# The binaries are needed even where an engine answers already: tests start private
	# servers of their own to stop, kill and freeze (internal/testengine).
	local missing=()
	if ! find_pg_bin; then
		missing+=(postgresql)
	fi
	if ! { command -v redis-server >/dev/null && command -v redis-cli >/dev/null; }; then
		missing+=(redis-server)
	fi
	if [ "${#missing[@]}" -gt 0 ]; then
		"$SCRIPTS/apt-install.sh" "${missing[@]}" || die "could not install ${missing[*]}; the tests need them"
	fi
	if [ -n "$PG_PORT" ]; then start_pg "$PG_PORT"; else log "PostgreSQL: the tests use WEB3GATE_TEST_POSTGRES; not managed here"; fi
	if [ -n "$REDIS_PORT" ]; then start_redis "$REDIS_PORT"; else log "Redis: the tests use WEB3GATE_TEST_REDIS; not managed here"; fi
}

cmd_stop() {
	local d
	[ -d "$BASE" ] || return 0
	for d in "$BASE"/pg-*; do
		[ -d "$d" ] && stop_pg "$d"
	done
	for d in "$BASE"/redis-*; do
		[ -d "$d" ] && stop_redis "$d"
	done
	rmdir "$BASE" 2>/dev/null || log "left $BASE in place: it holds files this script did not make"
}

# free_port: a port where nothing answers (checked, not reserved), below the kernel's
# ephemeral range (net.ipv4.ip_local_port_range, usually from 32768): a port in that range may
# be the local end of some client's connection at the moment a server binds it ("address
# already in use" although nothing listens there).
free_port() {
	local p _ lo=32768 hi=60999
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || true
	local from=10000 span=$((lo - 10000))
	if [ "$span" -lt 1000 ]; then
		from=$((hi + 1)) span=$((65535 - hi))
	fi
	for _ in $(seq 1 50); do
		p=$((from + (RANDOM * 32768 + RANDOM) % span))
		if ! port_open "$p"; then
			echo "$p"
			return 0
		fi
	done
	die "selftest: no free port found"
}

cmd_selftest() {
	local dir other pgp rdp psql pid1 pid2 rpid1 rpid2 out
	dir=$(mktemp -d "${TMPDIR:-/tmp}/web3gate-engines-selftest.XXXXXX")
	other=$(mktemp -d "${TMPDIR:-/tmp}/web3gate-engines-selftest-other.XXXXXX")
	chmod 755 "$dir" "$other"
	pgp=$(free_port)
	rdp=$(free_port)
	[ "$pgp" != "$rdp" ] || rdp=$(free_port)
	local self=("$SCRIPTS/test-engines.sh")
	run() { env WEB3GATE_ENGINES_DIR="$1" WEB3GATE_ENGINES_PG_PORT="$pgp" WEB3GATE_ENGINES_REDIS_PORT="$rdp" "${self[@]}" "$2"; }
	fail() {
		run "$dir" stop || true
		rm -rf "$dir" "$other"
		die "selftest: $*"
	}
	log "selftest: private instances on PostgreSQL $HOST:$pgp and Redis $HOST:$rdp in $dir"

	run "$dir" start || fail "start failed"
	find_pg_bin || fail "no PostgreSQL binaries after start"
	psql=$(pg_tool psql) || fail "psql not found"
	[ -f "$dir/pg-$pgp/started" ] && [ -f "$dir/redis-$rdp/started" ] || fail "start recorded no state in $dir"
	out=$("$psql" -X -w -h "$HOST" -p "$pgp" -U postgres -d postgres -qAtc \
		"CREATE TABLE selftest (x int); INSERT INTO selftest VALUES (42); SELECT x FROM selftest; SHOW max_connections; SHOW fsync" 2>&1) ||
		fail "psql on $HOST:$pgp as postgres: $out"
	[ "$out" = "$(printf '42\n%s\noff' "$PG_MAX_CONNECTIONS")" ] || fail "psql on $HOST:$pgp answered '$out'"
	out=$(redis-cli -h "$HOST" -p "$rdp" SET selftest 42 2>&1 && redis-cli -h "$HOST" -p "$rdp" GET selftest 2>&1) ||
		fail "redis-cli on $HOST:$rdp: $out"
	[ "$out" = "$(printf 'OK\n42')" ] || fail "redis-cli on $HOST:$rdp answered '$out'"

	pid1=$(head -n 1 "$dir/pg-$pgp/data/postmaster.pid")
	rpid1=$(cat "$dir/redis-$rdp/redis.pid")
	run "$dir" start || fail "second start failed"
	pid2=$(head -n 1 "$dir/pg-$pgp/data/postmaster.pid")
	rpid2=$(cat "$dir/redis-$rdp/redis.pid")
	[ "$pid1" = "$pid2" ] && [ "$rpid1" = "$rpid2" ] || fail "second start replaced the instances ($pid1/$rpid1 -> $pid2/$rpid2)"

	# Another directory finds both engines answering: it starts nothing and stops nothing.
	run "$other" start || fail "start beside running engines failed"
	[ -z "$(ls -A "$other" 2>/dev/null)" ] || fail "start beside running engines recorded state: $(ls -A "$other")"
	run "$other" stop || fail "stop of nothing failed"
	pg_ready "$pgp" && redis_ping "$rdp" || fail "a stop that started nothing stopped an engine"

	run "$dir" stop || fail "stop failed"
	! pg_answers "$pgp" || fail "PostgreSQL still answers on $HOST:$pgp after stop"
	! port_open "$rdp" || fail "Redis still answers on $HOST:$rdp after stop"
	[ ! -e "$dir" ] || fail "stop left $dir"
	run "$dir" stop || fail "a second stop failed"
	rm -rf "$other"
	log "selftest: ok (start, idempotent start, engines left alone when already answering, stop)"
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop ;;
selftest) cmd_selftest ;;
*)
	echo "usage: $0 start|stop|selftest" >&2
	exit 2
	;;
esac
