package store

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// PostgreSQL: one pool of connections shared by writers and readers, as many replicas of
// web3gate as wanted on one database. Writes are READ COMMITTED transactions; what SQLite's
// single writer serialized for free is serialized here by row locks (upserts, conditional
// updates) or, where a decision reads before it writes (a nonce reservation), by an advisory
// lock of the transaction (DBTx.LockAccount). Reads are READ ONLY REPEATABLE READ transactions:
// one snapshot, as a SQLite reader in WAL mode has.

var postgresDialect = &dialect{
	name:   "postgres",
	driver: "pgx", // registered by github.com/jackc/pgx/v5/stdlib
	rebind: rebindDollar,
	isUniqueViolation: func(err error) bool {
		var e *pgconn.PgError
		return errors.As(err, &e) && e.Code == "23505"
	},
	lockQuery:          `SELECT pg_advisory_xact_lock(?)`,
	hasMigrationsTable: `SELECT to_regclass('schema_migrations') IS NOT NULL`,
	unavailable:        pgUnavailable,
}

// TLS modes of store.tls.mode, as libpq's sslmode names them.
const (
	TLSDisable    = "disable"
	TLSRequire    = "require"
	TLSVerifyCA   = "verify-ca"
	TLSVerifyFull = "verify-full"
)

// TLSConfig is store.tls: how the PostgreSQL connections are encrypted. When Mode is set it
// replaces whatever sslmode the DSN names.
type TLSConfig struct {
	// Mode is disable, require (encrypted, the server not verified unless CAFile is set),
	// verify-ca (the server's certificate chains to CAFile, or the system's roots) or
	// verify-full (verify-ca, and the certificate names the host). Empty: the DSN's sslmode.
	Mode string `yaml:"mode"`
	// CAFile is a PEM file of the certificate authorities the server's certificate must chain to.
	CAFile string `yaml:"caFile"`
	// CertFile and KeyFile are a client certificate and its key (PEM), for servers that
	// authenticate clients by certificate; both or neither.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

func (c *TLSConfig) validate() []error {
	var errs []error
	switch c.Mode {
	case "", TLSDisable, TLSRequire, TLSVerifyCA, TLSVerifyFull:
	default:
		errs = append(errs, fmt.Errorf(`tls.mode: must be "disable", "require", "verify-ca" or "verify-full", got %q`, c.Mode))
	}
	if c.Mode == "" && (c.CAFile != "" || c.CertFile != "" || c.KeyFile != "") {
		errs = append(errs, errors.New("tls.mode: must be set when tls.caFile, tls.certFile or tls.keyFile is"))
	}
	if c.Mode == TLSDisable && (c.CAFile != "" || c.CertFile != "" || c.KeyFile != "") {
		errs = append(errs, errors.New(`tls.mode: "disable" takes no caFile, certFile or keyFile`))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("tls.certFile, tls.keyFile: give both or neither"))
	}
	return errs
}

// build is the tls.Config for host, nil for mode disable.
func (c *TLSConfig) build(host string) (*tls.Config, error) {
	if c.Mode == TLSDisable {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	var roots *x509.CertPool // nil: the system's roots
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.caFile: %w", err)
		}
		roots = x509.NewCertPool()
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.caFile: %s holds no PEM certificate", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.certFile, tls.keyFile: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	mode := c.Mode
	if mode == TLSRequire && c.CAFile != "" {
		mode = TLSVerifyCA // as libpq does when a root certificate is given
	}
	switch mode {
	case TLSRequire:
		tc.InsecureSkipVerify = true
	case TLSVerifyCA:
		// The chain is verified, the host name is not (crypto/tls verifies both or neither).
		tc.InsecureSkipVerify = true
		tc.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) == 0 {
				return errors.New("the server sent no certificate")
			}
			certs := make([]*x509.Certificate, len(raw))
			for i, b := range raw {
				cert, err := x509.ParseCertificate(b)
				if err != nil {
					return err
				}
				certs[i] = cert
			}
			opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, cert := range certs[1:] {
				opts.Intermediates.AddCert(cert)
			}
			_, err := certs[0].Verify(opts)
			return err
		}
	case TLSVerifyFull:
		tc.RootCAs = roots
		tc.ServerName = host
	}
	return tc, nil
}

// errDSN is the one error of a DSN that does not parse. It says nothing of the DSN itself:
// the parser's own messages may quote it, password included.
var errDSN = errors.New("dsn: not a PostgreSQL connection string (a postgres:// URL or key=value pairs)")

// pgConnConfig is the driver's configuration for cfg: the DSN's settings, then the pool's
// own (connect timeout, statement and lock timeouts, TLS).
func pgConnConfig(cfg *Config) (*pgx.ConnConfig, error) {
	cc, err := pgx.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, errDSN
	}
	cc.ConnectTimeout = cfg.ConnectTimeout
	if cc.RuntimeParams == nil {
		cc.RuntimeParams = map[string]string{}
	}
	cc.RuntimeParams["statement_timeout"] = strconv.FormatInt(cfg.StatementTimeout.Milliseconds(), 10)
	if cfg.LockTimeout > 0 {
		cc.RuntimeParams["lock_timeout"] = strconv.FormatInt(cfg.LockTimeout.Milliseconds(), 10)
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "web3gate"
	}
	if cfg.TLS.Mode != "" {
		// The DSN's sslmode made a TLS attempt and perhaps a plain fallback per host: keep
		// one attempt per host, with the configured TLS.
		type hp struct {
			host string
			port uint16
		}
		hosts := []hp{{cc.Host, cc.Port}}
		for _, f := range cc.Fallbacks {
			if h := (hp{f.Host, f.Port}); !containsHost(hosts, h, func(a, b hp) bool { return a == b }) {
				hosts = append(hosts, h)
			}
		}
		cc.Fallbacks = nil
		for i, h := range hosts {
			tc, err := cfg.TLS.build(h.host)
			if err != nil {
				return nil, err
			}
			if i == 0 {
				cc.TLSConfig = tc
				continue
			}
			cc.Fallbacks = append(cc.Fallbacks, &pgconn.FallbackConfig{Host: h.host, Port: h.port, TLSConfig: tc})
		}
	}
	return cc, nil
}

func containsHost[T any](s []T, v T, eq func(a, b T) bool) bool {
	for _, x := range s {
		if eq(x, v) {
			return true
		}
	}
	return false
}

// pgTarget names the database of cc for messages: user, host, port and database, never the
// password.
func pgTarget(cc *pgx.ConnConfig) string {
	host := cc.Host
	if !strings.HasPrefix(host, "/") {
		host = net.JoinHostPort(host, strconv.Itoa(int(cc.Port)))
	}
	return fmt.Sprintf("postgres %s@%s/%s", cc.User, host, cc.Database)
}

// scrubPassword removes pw from err's text, in case a driver message quotes it.
func scrubPassword(err error, pw string) error {
	if err == nil || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
}

// openPostgres opens the pool of cfg and migrates the database.
func openPostgres(ctx context.Context, cfg Config, db *DB, migs []migration) error {
	cc, err := pgConnConfig(&cfg)
	if err != nil {
		return err
	}
	db.target, db.password = pgTarget(cc), cc.Password
	db.txTimeout = cfg.TransactionTimeout
	db.pgConf = cc.Copy()
	pool := stdlib.OpenDB(*cc)
	pool.SetMaxOpenConns(cfg.MaxConns)
	pool.SetMaxIdleConns(cfg.MaxConns)
	// Connections are renewed now and then, so that a pool follows a failover or a
	// rebalanced proxy instead of keeping its first servers for ever.
	pool.SetConnMaxLifetime(30 * time.Minute)
	pool.SetConnMaxIdleTime(5 * time.Minute)
	db.write, db.read = pool, pool
	if err := pool.PingContext(ctx); err != nil {
		pool.Close()
		return fmt.Errorf("connect: %w", scrubPassword(err, cc.Password))
	}
	if db.schema, err = db.migratePostgres(ctx, migs); err != nil {
		pool.Close()
		return scrubPassword(err, cc.Password)
	}
	return nil
}

// migrationLockKey is the advisory lock (session level) the migrations of a database run
// under: replicas starting at once migrate one after the other, and each finds the work of
// those before it done.
const migrationLockKey = 0x77336761_74650001 // "w3gate" + 1

// migratePostgres is migrate on one connection holding migrationLockKey for the whole run.
func (db *DB) migratePostgres(ctx context.Context, migs []migration) (int, error) {
	conn, err := db.write.Conn(ctx)
	if err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	// A migration may run longer than a query may; the waiters for the lock wait as long.
	if _, err := conn.ExecContext(ctx, `SET statement_timeout = 0`); err != nil {
		return 0, fmt.Errorf("migrate: %w", err)
	}
	defer func() {
		// Back to the pool's settings (the connection returns to the pool).
		_, _ = conn.ExecContext(context.Background(), `RESET statement_timeout`)
	}()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, int64(migrationLockKey)); err != nil {
		return 0, fmt.Errorf("migrate: take the migration lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock($1)`, int64(migrationLockKey))
	}()
	return db.migrateWith(ctx, conn, migs, func(ctx context.Context, fn func(dbtx *DBTx) error) error {
		stx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(&DBTx{sqlTx: stx, d: db.d}); err != nil {
			_ = stx.Rollback()
			return err
		}
		return stx.Commit()
	})
}

// lockKey is the advisory lock key of a name: 64 bits of its FNV-1a hash. Two names with one
// key only serialize more than needed.
func lockKey(parts ...string) int64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return int64(h.Sum64())
}

// rebindDollar rewrites the `?` placeholders of query as $1, $2, ... and the type name BLOB
// (in CAST(? AS BLOB), for parameters whose type PostgreSQL cannot infer) as bytea, leaving
// string literals, quoted identifiers, dollar-quoted bodies and comments as they are.
func rebindDollar(query string) string {
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); {
		c := query[i]
		switch {
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			i++
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(query) {
				if query[j] == c {
					if j+1 < len(query) && query[j+1] == c { // doubled: an escaped quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			j = min(j+1, len(query))
			b.WriteString(query[i:j])
			i = j
		case c == '-' && i+1 < len(query) && query[i+1] == '-':
			j := strings.IndexByte(query[i:], '\n')
			if j < 0 {
				j = len(query) - i
			}
			b.WriteString(query[i : i+j])
			i += j
		case c == '/' && i+1 < len(query) && query[i+1] == '*':
			j := strings.Index(query[i+2:], "*/")
			end := len(query)
			if j >= 0 {
				end = i + 2 + j + 2
			}
			b.WriteString(query[i:end])
			i = end
		case c == '$' && (i == 0 || !isIdentByte(query[i-1])):
			// $tag$ ... $tag$ (a $n placeholder written by hand is copied as it is).
			j := i + 1
			for j < len(query) && query[j] != '$' && isIdentByte(query[j]) && !(j == i+1 && query[j] >= '0' && query[j] <= '9') {
				j++
			}
			if j < len(query) && query[j] == '$' {
				tag := query[i : j+1]
				end := strings.Index(query[j+1:], tag)
				stop := len(query)
				if end >= 0 {
					stop = j + 1 + end + len(tag)
				}
				b.WriteString(query[i:stop])
				i = stop
				continue
			}
			b.WriteByte(c)
			i++
		case isIdentByte(c) && (i == 0 || !isIdentByte(query[i-1])):
			j := i
			for j < len(query) && isIdentByte(query[j]) {
				j++
			}
			if w := query[i:j]; strings.EqualFold(w, "blob") {
				b.WriteString("bytea")
			} else {
				b.WriteString(w)
			}
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c < 0x80 && unicode.IsLetter(rune(c)) || c >= 0x80
}
