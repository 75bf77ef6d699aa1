package testengine

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresServer is a private PostgreSQL server for one test: its own data directory and
// loopback port, so that a test may stop, restart or freeze it without touching the shared
// one. As root it runs as the `postgres` Unix user (PostgreSQL refuses to run as root).
type PostgresServer struct {
	Port int
	t    testing.TB
	bin  string // directory of initdb, pg_ctl and postgres
	dir  string // owned by the server's user: data/, the socket and the log
	run  string // the Unix user running the server; "" = this process's
}

// PrivatePostgres initialises a PostgreSQL cluster in a new directory, starts it on a free
// loopback port with trust authentication (user postgres) and returns it; it is stopped and
// its directory removed when t ends. It fails the test when no PostgreSQL server binaries
// are found (PATH, or Debian's /usr/lib/postgresql/<version>/bin).
func PrivatePostgres(t testing.TB) *PostgresServer {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		t.Fatalf("testengine: %v", err)
	}
	s := &PostgresServer{t: t, bin: bin}
	if os.Geteuid() == 0 {
		s.run = "postgres"
	}
	// Not under t.TempDir(): its parents are private to root, and the server's user must
	// reach its own directory.
	if s.dir, err = os.MkdirTemp("", "web3gate-pg-"); err != nil {
		t.Fatalf("testengine: %v", err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(s.dir) })
	if s.run != "" {
		u, err := user.Lookup(s.run)
		if err != nil {
			t.Fatalf("testengine: PostgreSQL cannot run as root, and there is no user %q to run it: %v", s.run, err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			t.Fatalf("testengine: %v", err)
		}
	}
	if out, err := s.command("initdb", "-D", s.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("testengine: initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testengine: %v", err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	conf := fmt.Sprintf("listen_addresses = '127.0.0.1'\nport = %d\nunix_socket_directories = '%s'\nmax_connections = 40\nshared_buffers = 32MB\nlog_lock_waits = on\nlog_line_prefix = '%%m [%%p] %%a '\n",
		s.Port, s.dir)
	f, err := os.OpenFile(filepath.Join(s.data(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = f.WriteString(conf)
		err = joinErr(err, f.Close())
	}
	if err != nil {
		t.Fatalf("testengine: postgresql.conf: %v", err)
	}
	t.Cleanup(func() {
		if s.running() {
			_ = s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").Run()
		}
		if t.Failed() {
			if b, err := os.ReadFile(s.logFile()); err == nil {
				t.Logf("private PostgreSQL log:\n%s", b)
			}
		}
	})
	s.Start()
	return s
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// DSN is the connection string of the server's postgres database.
func (s *PostgresServer) DSN() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
}

// Start starts the server (after Stop) and waits until it accepts connections.
func (s *PostgresServer) Start() {
	s.t.Helper()
	if out, err := s.command("pg_ctl", "-D", s.data(), "-l", s.logFile(), "-w", "-t", "60", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(s.logFile())
		s.t.Fatalf("testengine: pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, s.DSN())
		if err == nil {
			conn.Close(context.Background())
			return
		}
		if ctx.Err() != nil {
			s.t.Fatalf("testengine: the private PostgreSQL does not accept connections: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop stops the server with pg_ctl's mode: "fast" (sessions are ended, a clean shutdown) or
// "immediate" (like a crash: the next start recovers from the WAL).
func (s *PostgresServer) Stop(mode string) {
	s.t.Helper()
	if out, err := s.command("pg_ctl", "-D", s.data(), "-m", mode, "-w", "-t", "60", "stop").CombinedOutput(); err != nil {
		s.t.Fatalf("testengine: pg_ctl stop -m %s: %v\n%s", mode, err, out)
	}
}

// Freeze stops every process of the server with SIGSTOP: connections stay open and nothing
// answers, as with a hung server or a network partition. Thaw resumes them.
func (s *PostgresServer) Freeze() { s.signal(sigStop) }

// Thaw resumes the processes Freeze stopped.
func (s *PostgresServer) Thaw() { s.signal(sigCont) }

// signal sends sig to the postmaster and every process it started.
func (s *PostgresServer) signal(sig syscall.Signal) {
	s.t.Helper()
	pid := s.postmaster()
	if pid == 0 {
		s.t.Fatalf("testengine: the private PostgreSQL is not running")
	}
	pids := append(children(pid), pid)
	for _, p := range pids {
		if err := kill(p, sig); err != nil && err != syscall.ESRCH {
			s.t.Fatalf("testengine: signal %v to %d: %v", sig, p, err)
		}
	}
}

// postmaster is the server's process id from postmaster.pid, 0 when it is not running.
func (s *PostgresServer) postmaster() int {
	b, err := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || kill(pid, 0) != nil {
		return 0
	}
	return pid
}

func (s *PostgresServer) running() bool { return s.postmaster() != 0 }

// children are the processes whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after its closing paren.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

func (s *PostgresServer) data() string    { return filepath.Join(s.dir, "data") }
func (s *PostgresServer) logFile() string { return filepath.Join(s.dir, "postgres.log") }

// command is the server program name run as the server's user.
func (s *PostgresServer) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.run == "" {
		return exec.Command(path, args...)
	}
	return exec.Command("runuser", append([]string{"-u", s.run, "--", path}, args...)...)
}

// postgresBin finds the directory of initdb, pg_ctl and postgres: PATH, else Debian's
// /usr/lib/postgresql/<version>/bin, newest version first.
func postgresBin() (string, error) {
	has := func(dir string) bool {
		for _, n := range []string{"initdb", "pg_ctl", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, n)); err != nil || fi.Mode()&0o111 == 0 {
				return false
			}
		}
		return true
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries (initdb, pg_ctl, postgres) in PATH or /usr/lib/postgresql/*/bin; install the postgresql package")
}

func versionOf(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}
