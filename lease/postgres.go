package lease

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"
)

// Leases as PostgreSQL session advisory locks. One connection per process, opened from the
// DSN and used for nothing else, holds every lease of the process; one goroutine owns it:
//
//   - every leaseCheckInterval it runs one query that asks pg_try_advisory_lock for every
//     lease wanted and not held (none: a bare heartbeat), bounded by leaseCheckInterval; a
//     new Hold is asked for at once;
//   - between queries it waits on the connection's socket, so that a session the server
//     ends (pg_terminate_backend, a restart) or a connection that drops is seen at once, not
//     at the next heartbeat;
//   - a failed query or a dead connection loses every lease of the process at once (their
//     jobs are cancelled), and the goroutine connects again;
//   - the session sets idle_session_timeout to leaseTimeout - 3/2 leaseCheckInterval: a
//     holder that hangs or is cut off from the server stops its heartbeats, the server ends
//     its session after that long and the locks go with it. The holder itself cancels its
//     jobs within two leaseCheckIntervals of its last heartbeat, well before.
//
// A standby that gets a lock waits leaseCheckInterval/2 before it starts the job: a holder
// whose session just died sees it at once, and that is the time its job has to stop.

// keyPrefix starts the input of every advisory lock key.
const keyPrefix = "web3gate lease"

// Key is the advisory lock key of the lease name in database under namespace: the first 8
// bytes, big-endian, of SHA-256 over "web3gate lease", database, namespace and name, each
// followed by a zero byte, as a signed 64-bit integer (pg_try_advisory_lock(bigint)).
func Key(database, namespace, name string) int64 {
	h := sha256.New()
	for _, s := range []string{keyPrefix, database, namespace, name} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return int64(binary.BigEndian.Uint64(h.Sum(nil)[:8]))
}

// NewPostgres returns Leases kept as advisory locks of the PostgreSQL database of dsn. Its
// connection is opened in the background (and again after each loss); a database that cannot
// be reached holds the Holds waiting, logged once per outage.
func NewPostgres(dsn string, cfg Config, deps Deps) (*Leases, error) {
	if dsn == "" {
		return nil, errors.New("lease: the PostgreSQL connection string is empty")
	}
	conf, err := pgx.ParseConfig(dsn)
	if err != nil {
		// pgx redacts the password of a connection string it reports.
		return nil, fmt.Errorf("lease: PostgreSQL connection string: %w", err)
	}
	return NewPostgresConfig(conf, cfg, deps)
}

// NewPostgresConfig is NewPostgres with a parsed connection configuration (which it keeps
// and changes).
func NewPostgresConfig(conf *pgx.ConnConfig, cfg Config, deps Deps) (*Leases, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("lease: cluster: %w", err)
	}
	if conf.RuntimeParams == nil {
		conf.RuntimeParams = map[string]string{}
	}
	conf.RuntimeParams["application_name"] = "web3gate lease " + cfg.ReplicaID
	ctx, cancel := context.WithCancel(context.Background())
	log := deps.Logger
	if log == nil {
		log = zap.NewNop()
	}
	b := &postgres{conf: conf, database: conf.Database, namespace: cfg.LeaseNamespace, t: cfg.timings(),
		timeout: cfg.LeaseTimeout, log: log, claims: map[*claim]struct{}{}, wake: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go b.run()
	return newLeases(cfg, b, deps), nil
}

type postgres struct {
	conf                *pgx.ConnConfig
	database, namespace string
	t                   timings
	timeout             time.Duration // leaseTimeout
	log                 *zap.Logger

	mu sync.Mutex
	// claims are the acquisitions wanted, held or being released. One Hold per name runs at
	// a time, but its next claim may be wanted while the last one is still being released.
	claims map[*claim]struct{}
	wake   chan struct{} // (capacity 1) a claim changed: the loop acts now

	ctx    context.Context // ends at close
	cancel context.CancelFunc
	done   chan struct{}
}

type claimState int

const (
	wanted claimState = iota
	held
	releasing
)

// claim is one Hold's acquisition of a lease, from its request to its release or loss.
type claim struct {
	name  string
	key   int64
	log   *zap.Logger
	state claimState // under postgres.mu

	asked, standing bool          // pg_try_advisory_lock asked once / refused (logged)
	granted         chan *grant   // (capacity 1) the grant, once held
	g               *grant        // once held
	released        chan struct{} // closed once unlocked, or once the session that held it died
}

func (b *postgres) key(name string) int64 { return Key(b.database, b.namespace, name) }

func (b *postgres) poke() {
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

func (b *postgres) acquire(ctx context.Context, name string, log *zap.Logger) (*grant, error) {
	c := &claim{name: name, key: b.key(name), log: log, granted: make(chan *grant, 1), released: make(chan struct{})}
	b.mu.Lock()
	b.claims[c] = struct{}{}
	b.mu.Unlock()
	b.poke()
	select {
	case g := <-c.granted:
		return g, nil
	case <-ctx.Done():
	}
	b.mu.Lock()
	if c.state == wanted {
		delete(b.claims, c)
		b.mu.Unlock()
		return nil, ctx.Err()
	}
	b.mu.Unlock()
	// Granted as ctx ended: give it back.
	_ = (<-c.granted).release()
	return nil, ctx.Err()
}

// releaseClaim asks the loop to unlock c and waits for it (or for the session's end) at most
// leaseCheckInterval; a lost lease needs nothing.
func (b *postgres) releaseClaim(c *claim) error {
	b.mu.Lock()
	if c.g.isLost() || c.state != held {
		b.mu.Unlock()
		return nil
	}
	c.state = releasing
	b.mu.Unlock()
	b.poke()
	select {
	case <-c.released:
		return nil
	case <-time.After(b.t.check):
		return errors.New("the lease connection did not unlock it in time; it is released when the connection ends")
	}
}

func (b *postgres) close() error {
	b.cancel()
	<-b.done
	return nil
}

// run connects and runs sessions until close.
func (b *postgres) run() {
	defer close(b.done)
	failing := false
	for b.ctx.Err() == nil {
		conn, err := b.connect()
		if err != nil {
			if b.ctx.Err() != nil {
				return
			}
			if !failing {
				b.log.Warn("lease: connecting to PostgreSQL failed; retrying (the leases wait)", zap.Error(err))
				failing = true
			}
			select {
			case <-b.ctx.Done():
			case <-time.After(b.t.check):
			}
			continue
		}
		if failing {
			b.log.Info("lease: connected to PostgreSQL again")
			failing = false
		}
		err = b.session(conn)
		b.endSession(err)
		cctx, cancel := context.WithTimeout(context.Background(), b.t.check)
		_ = conn.Close(cctx)
		cancel()
		if b.ctx.Err() == nil {
			b.log.Warn("lease: the PostgreSQL session ended: its leases are lost; reconnecting", zap.Error(err))
		}
	}
}

// connect opens the lease session: its own connection, idle_session_timeout bounding how long
// the server keeps the locks of a holder that went silent.
func (b *postgres) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.timeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, b.conf.Copy())
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	ms := b.t.idleSession.Milliseconds()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", ms)); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "42704" { // undefined_object: before PostgreSQL 14
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("set idle_session_timeout: %w", err)
		}
		// TCP keepalives bound a holder cut off from the server, not one that hangs.
		secs := max(1, int(b.t.idleSession/3/time.Second))
		if _, err := conn.Exec(ctx, fmt.Sprintf("SET tcp_keepalives_idle = %d; SET tcp_keepalives_interval = %d; SET tcp_keepalives_count = 2", secs, secs)); err != nil {
			_ = conn.Close(ctx)
			return nil, fmt.Errorf("set tcp_keepalives: %w", err)
		}
		b.log.Warn("lease: PostgreSQL before 14 has no idle_session_timeout: a lease holder that hangs keeps its leases until it is stopped")
	}
	return conn, nil
}

// session runs the lease protocol on conn until the connection fails or close; it returns why.
func (b *postgres) session(conn *pgx.Conn) error {
	next := time.Now()
	for b.ctx.Err() == nil {
		if err := b.unlockReleasing(conn); err != nil {
			return err
		}
		if b.due(next) {
			next = time.Now().Add(b.t.check)
			if err := b.tryLocks(conn); err != nil {
				return err
			}
			continue // unlock what was granted to a claim withdrawn meanwhile
		}
		if err := b.wait(conn, next); err != nil {
			return err
		}
	}
	return b.ctx.Err()
}

// due reports whether the next query is due: the heartbeat's time came, or a claim was never
// asked for yet.
func (b *postgres) due(next time.Time) bool {
	if !time.Now().Before(next) {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.claims {
		if c.state == wanted && !c.asked {
			return true
		}
	}
	return false
}

// tryLocks asks for every wanted lease in one query, which is the heartbeat as well.
func (b *postgres) tryLocks(conn *pgx.Conn) error {
	b.mu.Lock()
	keys := make([]int64, 0, len(b.claims))
	for c := range b.claims {
		if c.state == wanted {
			keys = append(keys, c.key)
		}
	}
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, b.t.check)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT k, pg_try_advisory_lock(k) FROM unnest($1::bigint[]) AS t(k)`, keys)
	if err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	got := map[int64]bool{}
	for rows.Next() {
		var (
			k  int64
			ok bool
		)
		if err := rows.Scan(&k, &ok); err != nil {
			rows.Close()
			return fmt.Errorf("heartbeat: %w", err)
		}
		got[k] = ok
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	var orphans []int64
	b.mu.Lock()
	byKey := make(map[int64]*claim, len(b.claims))
	for c := range b.claims {
		if c.state == wanted {
			byKey[c.key] = c
		}
	}
	for k, ok := range got {
		c := byKey[k]
		if c == nil {
			if ok {
				orphans = append(orphans, k) // its Hold gave up meanwhile
			}
			continue
		}
		c.asked = true
		if !ok {
			if !c.standing {
				c.log.Info("lease held elsewhere: standing by")
				c.standing = true
			}
			continue
		}
		c.state = held
		c.g = newGrant(0, b.t.grace)
		c.g.release = func() error { return b.releaseClaim(c) }
		c.granted <- c.g
	}
	b.mu.Unlock()
	if len(orphans) > 0 {
		return b.unlock(conn, orphans)
	}
	return nil
}

// unlockReleasing unlocks the leases whose jobs returned.
func (b *postgres) unlockReleasing(conn *pgx.Conn) error {
	var rel []*claim
	b.mu.Lock()
	for c := range b.claims {
		if c.state == releasing {
			rel = append(rel, c)
		}
	}
	b.mu.Unlock()
	if len(rel) == 0 {
		return nil
	}
	keys := make([]int64, len(rel))
	for i, c := range rel {
		keys[i] = c.key
	}
	if err := b.unlock(conn, keys); err != nil {
		return err
	}
	b.mu.Lock()
	for _, c := range rel {
		delete(b.claims, c)
		close(c.released)
	}
	b.mu.Unlock()
	return nil
}

func (b *postgres) unlock(conn *pgx.Conn, keys []int64) error {
	ctx, cancel := context.WithTimeout(b.ctx, b.t.check)
	defer cancel()
	rows, err := conn.Query(ctx, `SELECT k, pg_advisory_unlock(k) FROM unnest($1::bigint[]) AS t(k)`, keys)
	if err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	for rows.Next() {
		var (
			k  int64
			ok bool
		)
		if err := rows.Scan(&k, &ok); err != nil {
			rows.Close()
			return fmt.Errorf("unlock: %w", err)
		}
		if !ok {
			b.log.Warn("lease: an advisory lock to release was not held by the session", zap.Int64("key", k))
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

// wait blocks until until, a poke, close, or the end of the connection (its error): the
// socket is read meanwhile, so that a session ended by the server or a dropped connection is
// seen at once.
func (b *postgres) wait(conn *pgx.Conn, until time.Time) error {
	d := time.Until(until)
	if d <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, d)
	stop := make(chan struct{})
	defer cancel()
	defer close(stop)
	go func() {
		select {
		case <-b.wake:
			cancel()
		case <-stop:
		}
	}()
	err := conn.PgConn().WaitForNotification(ctx)
	if err == nil || ctx.Err() != nil && !conn.IsClosed() {
		return nil // a notification (nothing listens), or the wait's end
	}
	return fmt.Errorf("connection: %w", err)
}

// endSession loses every lease the ended session held, and lets the claims still wanted be
// asked for on the next session.
func (b *postgres) endSession(why error) {
	if why == nil || errors.Is(why, context.Canceled) && b.ctx.Err() != nil {
		why = errors.New("the lease connection was closed")
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.claims {
		switch c.state {
		case held:
			c.g.lose(fmt.Errorf("the PostgreSQL session holding it ended: %w", why))
			delete(b.claims, c)
		case releasing:
			close(c.released)
			delete(b.claims, c)
		case wanted:
			c.asked = false
		}
	}
}
