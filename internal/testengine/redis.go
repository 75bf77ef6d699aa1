package testengine

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// RedisAddr is the shared test Redis, host:port.
func RedisAddr() string {
	if s := os.Getenv("WEB3GATE_TEST_REDIS"); s != "" {
		return s
	}
	return "127.0.0.1:6379"
}

// Redis returns the URL of the shared test Redis and a key prefix of t's own. Every key
// under the prefix is deleted when t ends (never anything else: the Redis is shared).
func Redis(t testing.TB) (url, prefix string) {
	t.Helper()
	addr := RedisAddr()
	if _, err := RedisCommand(addr, "PING"); err != nil {
		t.Fatalf("testengine: Redis at %s is not reachable (set WEB3GATE_TEST_REDIS to host:port): %v", addr, err)
	}
	prefix = "w3g-test-" + randomHex(6) + ":"
	t.Cleanup(func() {
		if err := DeleteRedisPrefix(addr, prefix); err != nil {
			t.Errorf("testengine: delete the keys %s*: %v", prefix, err)
		}
	})
	return "redis://" + addr, prefix
}

// RedisKeys lists the keys under prefix at addr.
func RedisKeys(addr, prefix string) ([]string, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true, DisableCache: true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var keys []string
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			return keys, err
		}
		keys = append(keys, e.Elements...)
		if cursor = e.Cursor; cursor == 0 {
			return keys, nil
		}
	}
}

// DeleteRedisPrefix deletes every key under prefix at addr.
func DeleteRedisPrefix(addr, prefix string) error {
	if !strings.HasSuffix(prefix, ":") || len(prefix) < 8 {
		return fmt.Errorf("refusing to delete under the prefix %q: too broad", prefix)
	}
	keys, err := RedisKeys(addr, prefix)
	if err != nil || len(keys) == 0 {
		return err
	}
	args := append([]string{"DEL"}, keys...)
	_, err = RedisCommand(addr, args...)
	return err
}

// RedisCommand sends one command on a new connection and returns the first line of the
// reply ("+OK", ":1", "$5" ...); an error reply is an error.
func RedisCommand(addr string, args ...string) (string, error) {
	return redisCommand(addr, 30*time.Second, args...)
}

func redisCommand(addr string, timeout time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return "", fmt.Errorf("redis: %s", line[1:])
	}
	return line, nil
}

// RedisServer is a private redis-server for one test: its own port and directory, no
// persistence, so that a test may kill it, stall it and restart it without touching the
// shared one.
type RedisServer struct {
	t    testing.TB
	dir  string
	Port int
	cmd  *exec.Cmd
	done chan struct{}
}

// PrivateRedis starts a redis-server on a free loopback port for t; it is killed when t ends.
func PrivateRedis(t testing.TB) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("testengine: redis-server is not installed (apt-get install redis-server): %v", err)
	}
	s := &RedisServer{t: t, dir: t.TempDir()}
	var errs []string
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.Port = ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if err := s.start(bin); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		t.Cleanup(s.Kill)
		return s
	}
	t.Fatalf("testengine: no private redis-server started: %s", strings.Join(errs, "; "))
	return nil
}

// Addr is the server's host:port.
func (s *RedisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the server's redis:// URL.
func (s *RedisServer) URL() string { return "redis://" + s.Addr() }

func (s *RedisServer) start(bin string) error {
	cmd := exec.Command(bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--enable-debug-command", "local", "--logfile", filepath.Join(s.dir, "redis.log"))
	cmd.SysProcAttr = dieWithParent()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := RedisCommand(s.Addr(), "PING"); err == nil {
			s.cmd, s.done = cmd, done
			return nil
		}
		select {
		case <-done:
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			return fmt.Errorf("redis-server on port %d exited: %s", s.Port, log)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			<-done
			return fmt.Errorf("redis-server on port %d not ready within 10s", s.Port)
		}
	}
}

// Kill sends SIGKILL (kill -9) and waits until the process is gone.
func (s *RedisServer) Kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd = nil
}

// Restart starts the server again on the same port (after Kill), with no data.
func (s *RedisServer) Restart() {
	s.t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		s.t.Fatal(err)
	}
	if err := s.start(bin); err != nil {
		s.t.Fatalf("testengine: restart redis-server: %v", err)
	}
}

// Stall makes the server answer nothing for d (DEBUG SLEEP: the whole server sleeps). It
// returns once the server has stopped answering; the channel is closed when the sleep is over.
func (s *RedisServer) Stall(d time.Duration) <-chan struct{} {
	s.t.Helper()
	over := make(chan struct{})
	go func() {
		defer close(over)
		if _, err := redisCommand(s.Addr(), d+30*time.Second, "DEBUG", "SLEEP", strconv.FormatFloat(d.Seconds(), 'f', 3, 64)); err != nil {
			s.t.Errorf("DEBUG SLEEP: %v", err)
		}
	}()
	for {
		if _, err := redisCommand(s.Addr(), 100*time.Millisecond, "PING"); err != nil {
			return over // the PING found the server asleep
		}
		select {
		case <-over:
			s.t.Fatal("testengine: DEBUG SLEEP ended before a PING found the server asleep")
		case <-time.After(5 * time.Millisecond):
		}
	}
}
