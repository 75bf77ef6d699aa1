package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Webhooks (migration 0016 on SQLite, 0006 on PostgreSQL): the endpoints of each principal,
// the outbox of transaction state changes the trigger txs_webhook_event writes in the
// transaction that changes a state, and one delivery per (event, endpoint). The webhooks
// package delivers them; these functions only read and move rows.

// Sources of a webhook.
const (
	WebhookSourceConfig = "config" // webhooks.endpoints, synced at start
	WebhookSourceAdmin  = "admin"  // POST /v1/admin/webhooks
)

// States of a webhook delivery.
const (
	DeliveryPending   = "pending"   // to be tried at NextAttemptAt
	DeliveryDelivered = "delivered" // the endpoint answered 2xx
	DeliveryDead      = "dead"      // every attempt failed (webhooks.maxAttempts)
)

// Webhook is one endpoint of a principal.
type Webhook struct {
	ID        string
	Principal string
	URL       string
	// Secret is the HMAC-SHA256 key of the signatures; never shown after creation.
	Secret    string
	Source    string
	Enabled   bool
	CreatedAt time.Time
}

// WebhookEvent is one state change of a transaction, as the trigger recorded it, with the
// transaction's fixed fields (chain, sender, nonce) read from its row.
type WebhookEvent struct {
	Seq         int64
	TxID        int64
	Principal   string
	State       string
	Hash        string // the original hash; "" before the transaction was signed
	MinedHash   string // the hash of the version in the block (mined, confirmed, cancelled); else ""
	BlockNumber *uint64
	BlockHash   string
	Error       string
	CreatedAt   time.Time
	ChainID     uint64
	From        string // lowercase 0x address
	Nonce       uint64
	Kind        string // KindSend, KindSign or KindFiller
}

// WebhookDelivery is one delivery of an event to an endpoint.
type WebhookDelivery struct {
	ID            int64
	WebhookID     string
	State         string
	Attempts      int
	NextAttemptAt time.Time
	LastStatus    int // 0: no HTTP answer (yet)
	LastError     string
	DeliveredAt   *time.Time
	CreatedAt     time.Time
	Event         WebhookEvent
	// URL and Secret are the endpoint's, filled by DueWebhookDeliveries only.
	URL, Secret string
}

// WebhookAttempt is the outcome of one delivery attempt.
type WebhookAttempt struct {
	State         string    // DeliveryDelivered, DeliveryPending (try again) or DeliveryDead
	NextAttemptAt time.Time // DeliveryPending: when to try again
	Status        int       // the HTTP status; 0: none
	Error         string    // why it failed (bounded, no secrets); "" when delivered
	At            time.Time
}

func checkWebhook(w Webhook) error {
	if w.ID == "" || w.Principal == "" || w.URL == "" || w.Secret == "" {
		return errors.New("webhook: id, principal, url and secret must not be empty")
	}
	if w.Source != WebhookSourceConfig && w.Source != WebhookSourceAdmin {
		return fmt.Errorf("webhook: source %q is not config or admin", w.Source)
	}
	return checkTexts("webhook: principal", w.Principal, "webhook: url", w.URL, "webhook: secret", w.Secret)
}

// InsertWebhook records w (enabled); ErrExists when the principal has an endpoint with that
// URL, or the id is taken.
func (t *DBTx) InsertWebhook(ctx context.Context, w Webhook) error {
	if err := checkWebhook(w); err != nil {
		return err
	}
	_, err := t.ExecContext(ctx, qInsertWebhook, w.ID, w.Principal, w.URL, w.Secret, w.Source, 1, formatTime(w.CreatedAt))
	if err != nil {
		return fmt.Errorf("insert webhook: %w", t.classify(err))
	}
	return t.armWebhookEvents(ctx)
}

// armWebhookEvents enables the outbox trigger on txs, on PostgreSQL, where it ships disabled
// (migration 0006: its function would otherwise run at every state change) until an endpoint
// exists: in the transaction that adds or enables one, so that no state change committed after
// that endpoint goes without its event. Enabling locks txs against writes until the commit;
// it happens once (an enabled trigger is left as it is). On SQLite the trigger's WHEN asks
// for the endpoint itself.
func (t *DBTx) armWebhookEvents(ctx context.Context) error {
	if t.d != postgresDialect {
		return nil
	}
	var state string
	if err := t.QueryRowContext(ctx, `SELECT tgenabled FROM pg_trigger
		WHERE tgrelid = 'txs'::regclass AND tgname = 'txs_webhook_event'`).Scan(&state); err != nil {
		return fmt.Errorf("webhook events trigger: %w", err)
	}
	if state == "D" {
		if _, err := t.ExecContext(ctx, `ALTER TABLE txs ENABLE TRIGGER txs_webhook_event`); err != nil {
			return fmt.Errorf("enable the webhook events trigger: %w", err)
		}
	}
	return nil
}

// SyncConfigWebhooks makes the endpoints from the config ws (source config, each with the id
// to use when it is new) the enabled config endpoints: each is upserted by principal and URL
// (its secret and source taken from ws, enabled), and every other config endpoint is
// disabled, its log kept. It returns the endpoints as stored, in the order of ws.
func (t *DBTx) SyncConfigWebhooks(ctx context.Context, ws []Webhook) ([]Webhook, error) {
	out := make([]Webhook, 0, len(ws))
	keep := map[string]bool{}
	for _, w := range ws {
		w.Source = WebhookSourceConfig
		if err := checkWebhook(w); err != nil {
			return nil, err
		}
		cur, err := scanWebhook(t.QueryRowContext(ctx, qWebhookByURL, w.Principal, w.URL))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if err := t.InsertWebhook(ctx, w); err != nil {
				return nil, err
			}
			w.Enabled = true
		case err != nil:
			return nil, fmt.Errorf("sync webhooks: %w", err)
		default:
			if _, err := t.ExecContext(ctx, qUpdateConfigWebhook, w.Secret, WebhookSourceConfig, 1, cur.ID); err != nil {
				return nil, fmt.Errorf("sync webhooks: %w", err)
			}
			if err := t.armWebhookEvents(ctx); err != nil {
				return nil, err
			}
			w.ID, w.CreatedAt, w.Enabled = cur.ID, cur.CreatedAt, true
		}
		keep[w.ID] = true
		out = append(out, w)
	}
	stale, err := t.queryWebhooks(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE source = ? AND enabled = 1`, WebhookSourceConfig)
	if err != nil {
		return nil, fmt.Errorf("sync webhooks: %w", err)
	}
	for _, w := range stale {
		if keep[w.ID] {
			continue
		}
		if _, err := t.ExecContext(ctx, `UPDATE webhooks SET enabled = ? WHERE id = ?`, 0, w.ID); err != nil {
			return nil, fmt.Errorf("sync webhooks: %w", err)
		}
	}
	return out, nil
}

// Webhook is the endpoint id, or ErrNotFound.
func (t *DBTx) Webhook(ctx context.Context, id string) (Webhook, error) {
	if !validText(id) {
		return Webhook{}, fmt.Errorf("webhook: %w", ErrNotFound)
	}
	w, err := scanWebhook(t.QueryRowContext(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Webhook{}, fmt.Errorf("webhook: %w", ErrNotFound)
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("webhook: %w", err)
	}
	return w, nil
}

// Webhooks are the endpoints of principal ("": of every principal), oldest first.
func (t *DBTx) Webhooks(ctx context.Context, principal string) ([]Webhook, error) {
	if principal == "" {
		return t.queryWebhooks(ctx, `SELECT `+webhookColumns+` FROM webhooks ORDER BY created_at, id`)
	}
	if !validText(principal) {
		return nil, nil
	}
	return t.queryWebhooks(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE principal = ? ORDER BY created_at, id`, principal)
}

// DeleteWebhook removes the endpoint id and its deliveries (its events stay: other endpoints
// of the principal may have them still); ErrNotFound when there is none.
func (t *DBTx) DeleteWebhook(ctx context.Context, id string) error {
	if !validText(id) {
		return fmt.Errorf("delete webhook: %w", ErrNotFound)
	}
	// Explicit, not left to ON DELETE CASCADE: SQLite connections opened without
	// foreign_keys (a CLI tool's) would leave the rows behind.
	if _, err := t.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE webhook_id = ?`, id); err != nil {
		return fmt.Errorf("delete webhook: %w", err)
	}
	res, err := t.ExecContext(ctx, `DELETE FROM webhooks WHERE id = ?`, id)
	return oneRow(res, err, "delete webhook")
}

// DueWebhookDeliveries are at most limit pending deliveries to enabled endpoints due at now,
// without an earlier pending event of the same transaction to the same endpoint (order per
// transaction: a pending event holds back the later ones; a delivered or dead one does not),
// the longest due first, each with its event and its endpoint's URL and secret.
func (t *DBTx) DueWebhookDeliveries(ctx context.Context, now time.Time, limit int) ([]WebhookDelivery, error) {
	rows, err := t.QueryContext(ctx, qDueDeliveries, formatTime(now), limit)
	if err != nil {
		return nil, fmt.Errorf("due webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []WebhookDelivery
	for rows.Next() {
		var (
			d    WebhookDelivery
			next string
		)
		dest := []any{&d.ID, &d.WebhookID, &d.State, &d.Attempts, &next, &d.URL, &d.Secret}
		ev, evDest := eventDest()
		if err := rows.Scan(append(dest, evDest...)...); err != nil {
			return nil, fmt.Errorf("due webhook deliveries: %w", err)
		}
		if d.NextAttemptAt, err = parseTime(next); err != nil {
			return nil, err
		}
		if d.Event, err = ev(); err != nil {
			return nil, fmt.Errorf("due webhook deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("due webhook deliveries: %w", err)
	}
	return out, nil
}

// FinishWebhookAttempt records the outcome of one attempt of the pending delivery id: one
// more attempt, its status and error, and the new state. ErrNotFound when the delivery is
// not pending (any more).
func (t *DBTx) FinishWebhookAttempt(ctx context.Context, id int64, a WebhookAttempt) error {
	var (
		st        sql.NullInt64
		delivered sql.NullString
	)
	if a.Status != 0 {
		st = sql.NullInt64{Int64: int64(a.Status), Valid: true}
	}
	if a.State == DeliveryDelivered {
		delivered = nullString(formatTime(a.At))
	}
	next := a.NextAttemptAt
	if a.State != DeliveryPending {
		next = a.At
	}
	res, err := t.ExecContext(ctx, qFinishAttempt, a.State, formatTime(next), st, nullString(cleanText(a.Error)), delivered, id, DeliveryPending)
	return oneRow(res, err, "finish webhook attempt")
}

// WebhookDeliveries are the newest limit deliveries to endpoint webhookID, newest first (by
// event: the index on (webhook_id, event_seq) reads them in order), each with its event (URL
// and Secret left empty).
func (t *DBTx) WebhookDeliveries(ctx context.Context, webhookID string, limit int) ([]WebhookDelivery, error) {
	if !validText(webhookID) {
		return nil, nil
	}
	rows, err := t.QueryContext(ctx, qDeliveryLog, webhookID, limit)
	if err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	defer rows.Close()
	var out []WebhookDelivery
	for rows.Next() {
		var (
			d                    WebhookDelivery
			next, created        string
			status               sql.NullInt64
			lastErr, deliveredAt sql.NullString
		)
		dest := []any{&d.ID, &d.WebhookID, &d.State, &d.Attempts, &next, &status, &lastErr, &deliveredAt, &created}
		ev, evDest := eventDest()
		if err := rows.Scan(append(dest, evDest...)...); err != nil {
			return nil, fmt.Errorf("webhook deliveries: %w", err)
		}
		if d.NextAttemptAt, err = parseTime(next); err != nil {
			return nil, err
		}
		if d.CreatedAt, err = parseTime(created); err != nil {
			return nil, err
		}
		d.LastStatus, d.LastError = int(status.Int64), lastErr.String
		if deliveredAt.Valid {
			at, err := parseTime(deliveredAt.String)
			if err != nil {
				return nil, err
			}
			d.DeliveredAt = &at
		}
		if d.Event, err = ev(); err != nil {
			return nil, fmt.Errorf("webhook deliveries: %w", err)
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhook deliveries: %w", err)
	}
	return out, nil
}

// PruneWebhookDeliveries deletes at most limit delivered and dead deliveries that finished
// before before, the oldest first, and returns how many it deleted. Pending ones are never
// touched, so the order rule (a pending delivery holds back the later events of its
// transaction) is the same before and after.
func (t *DBTx) PruneWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := t.ExecContext(ctx, qPruneDeliveries, formatTime(before), limit)
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune webhook deliveries: %w", err)
	}
	return n, nil
}

// PruneWebhookEvents deletes at most limit events recorded before before that no delivery
// refers to any more (every one was pruned, or its endpoint deleted), the oldest first, and
// returns how many it deleted. An event with a delivery left, pending or not, stays.
func (t *DBTx) PruneWebhookEvents(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := t.ExecContext(ctx, qPruneEvents, formatTime(before), limit)
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("prune webhook events: %w", err)
	}
	return n, nil
}

// PendingWebhookDeliveries counts the pending deliveries to enabled endpoints.
func (t *DBTx) PendingWebhookDeliveries(ctx context.Context) (int64, error) {
	var n int64
	if err := t.QueryRowContext(ctx, qPendingDeliveries).Scan(&n); err != nil {
		return 0, fmt.Errorf("pending webhook deliveries: %w", err)
	}
	return n, nil
}

// HasEnabledWebhooks reports whether any principal has an enabled endpoint.
func (t *DBTx) HasEnabledWebhooks(ctx context.Context) (bool, error) {
	var has bool
	if err := t.QueryRowContext(ctx, qHasEnabledWebhooks).Scan(&has); err != nil {
		return false, fmt.Errorf("enabled webhooks: %w", err)
	}
	return has, nil
}

// WebhookEvents are the events of transaction txID, by seq (tests and tools).
func (t *DBTx) WebhookEvents(ctx context.Context, txID int64) ([]WebhookEvent, error) {
	rows, err := t.QueryContext(ctx, `SELECT `+eventColumns+` FROM webhook_events e LEFT JOIN txs x ON x.id = e.tx_id
		WHERE e.tx_id = ? ORDER BY e.seq`, txID)
	if err != nil {
		return nil, fmt.Errorf("webhook events: %w", err)
	}
	defer rows.Close()
	var out []WebhookEvent
	for rows.Next() {
		ev, dest := eventDest()
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("webhook events: %w", err)
		}
		e, err := ev()
		if err != nil {
			return nil, fmt.Errorf("webhook events: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

const webhookColumns = `id, principal, url, secret, source, enabled, created_at`

// eventColumns are an event (alias e) and its transaction's fixed fields (alias x, LEFT
// JOINed: NULL when the row is gone).
const eventColumns = `e.seq, e.tx_id, e.principal, e.state, e.hash, e.mined_hash, e.block_number, e.block_hash, e.error, e.created_at,
	x.chain_id, x.address, x.nonce, x.kind`

// eventDest returns the scan destinations of eventColumns and the function that builds the
// event from them once scanned.
func eventDest() (func() (WebhookEvent, error), []any) {
	var (
		e                                  WebhookEvent
		hash, minedHash, blockHash, errMsg sql.NullString
		from, kind                         sql.NullString
		blockNumber, chainID, nonce        sql.NullInt64
		created                            string
	)
	dest := []any{&e.Seq, &e.TxID, &e.Principal, &e.State, &hash, &minedHash, &blockNumber, &blockHash, &errMsg, &created, &chainID, &from, &nonce, &kind}
	return func() (WebhookEvent, error) {
		var err error
		if e.CreatedAt, err = parseTime(created); err != nil {
			return WebhookEvent{}, err
		}
		e.Hash, e.MinedHash, e.BlockHash, e.Error, e.From, e.Kind = hash.String, minedHash.String, blockHash.String, errMsg.String, from.String, kind.String
		if blockNumber.Valid {
			n := uint64(blockNumber.Int64)
			e.BlockNumber = &n
		}
		e.ChainID, e.Nonce = uint64(chainID.Int64), uint64(nonce.Int64)
		return e, nil
	}, dest
}

func scanWebhook(r interface{ Scan(...any) error }) (Webhook, error) {
	var (
		w       Webhook
		created string
		enabled int64
	)
	if err := r.Scan(&w.ID, &w.Principal, &w.URL, &w.Secret, &w.Source, &enabled, &created); err != nil {
		return Webhook{}, err
	}
	w.Enabled = enabled == 1
	var err error
	w.CreatedAt, err = parseTime(created)
	return w, err
}

func (t *DBTx) queryWebhooks(ctx context.Context, query string, args ...any) ([]Webhook, error) {
	rows, err := t.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	defer rows.Close()
	var out []Webhook
	for rows.Next() {
		w, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("webhooks: %w", err)
		}
		out = append(out, w)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	return out, nil
}

// The states and the enabled flag are literals in the queries, not parameters: a partial
// index (WHERE state = 'pending', WHERE enabled = 1) serves a query only when the planner can
// see that the query's terms imply the index's, which it cannot for a parameter.
var (
	qInsertWebhook = prepared(`INSERT INTO webhooks (` + webhookColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`)
	qWebhookByURL  = prepared(`SELECT ` + webhookColumns + ` FROM webhooks WHERE principal = ? AND url = ?`)
	// The source too: an admin endpoint that the config now names becomes a config one.
	qUpdateConfigWebhook = prepared(`UPDATE webhooks SET secret = ?, source = ?, enabled = ? WHERE id = ?`)
	qDueDeliveries       = prepared(`SELECT d.id, d.webhook_id, d.state, d.attempts, d.next_attempt_at, w.url, w.secret, ` + eventColumns + `
		FROM webhook_deliveries d
		JOIN webhooks w ON w.id = d.webhook_id
		JOIN webhook_events e ON e.seq = d.event_seq
		LEFT JOIN txs x ON x.id = e.tx_id
		WHERE d.state = 'pending' AND d.next_attempt_at <= ? AND w.enabled = 1
		  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries p
			WHERE p.webhook_id = d.webhook_id AND p.tx_id = d.tx_id AND p.state = 'pending' AND p.event_seq < d.event_seq)
		ORDER BY d.next_attempt_at, d.event_seq
		LIMIT ?`)
	qFinishAttempt = prepared(`UPDATE webhook_deliveries SET state = ?, attempts = attempts + 1, next_attempt_at = ?,
		last_status = ?, last_error = ?, delivered_at = ? WHERE id = ? AND state = ?`)
	qDeliveryLog = prepared(`SELECT d.id, d.webhook_id, d.state, d.attempts, d.next_attempt_at, d.last_status, d.last_error,
		d.delivered_at, d.created_at, ` + eventColumns + `
		FROM webhook_deliveries d
		JOIN webhook_events e ON e.seq = d.event_seq
		LEFT JOIN txs x ON x.id = e.tx_id
		WHERE d.webhook_id = ?
		ORDER BY d.event_seq DESC
		LIMIT ?`)
	// A finished delivery's next_attempt_at is when it finished (FinishWebhookAttempt);
	// "state <> 'pending'" is the partial index webhook_deliveries_finished's own term.
	qPruneDeliveries = prepared(`DELETE FROM webhook_deliveries WHERE id IN (
		SELECT id FROM webhook_deliveries WHERE state <> 'pending' AND next_attempt_at < ? ORDER BY next_attempt_at LIMIT ?)`)
	qPruneEvents = prepared(`DELETE FROM webhook_events WHERE seq IN (
		SELECT e.seq FROM webhook_events e WHERE e.created_at < ?
		  AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_seq = e.seq)
		ORDER BY e.created_at LIMIT ?)`)
	qHasEnabledWebhooks = prepared(`SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled = 1)`)
	qPendingDeliveries  = prepared(`SELECT COUNT(*) FROM webhook_deliveries d JOIN webhooks w ON w.id = d.webhook_id
		WHERE d.state = 'pending' AND w.enabled = 1`)
)
