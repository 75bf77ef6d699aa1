package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/web3gate/web3gate/internal/netpolicy"
	"github.com/web3gate/web3gate/store"
)

// userAgent is sent with every delivery.
const userAgent = "web3gate-webhooks/1"

// client posts deliveries: the address policy checked at every connection, no proxy from the
// environment, redirects not followed (a 3xx is a failure), each attempt bounded by
// webhooks.timeout.
type client struct {
	http    *http.Client
	timeout time.Duration
}

func newClient(cfg Config, policy netpolicy.Policy) *client {
	dialer := &net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second, Control: policy.Control}
	transport := &http.Transport{
		Proxy:                  nil, // never the environment's proxies: they would bypass the policy
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		TLSClientConfig:        &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    cfg.Timeout,
		ResponseHeaderTimeout:  cfg.Timeout,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    cfg.Concurrency,
		IdleConnTimeout:        60 * time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &client{timeout: cfg.Timeout, http: &http.Client{
		Transport:     transport,
		Timeout:       cfg.Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

func (c *client) closeIdle() { c.http.CloseIdleConnections() }

// maxDrain is how much of an answer's body is read (to reuse the connection); the rest is
// dropped with the connection.
const maxDrain = 64 << 10

// post sends body to url signed with secret and returns the HTTP status (0: none) and, for
// anything but a 2xx, why it failed: a short fixed phrase, never the URL, the secret or the
// answer's body.
func (c *client) post(ctx context.Context, url, secret, eventID string, body []byte, now time.Time) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, errors.New("invalid URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(EventIDHeader, eventID)
	req.Header.Set(SignatureHeader, Sign(secret, now, body))
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, c.reason(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	_ = resp.Body.Close()
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return resp.StatusCode, nil
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return resp.StatusCode, fmt.Errorf("HTTP %d: redirects are not followed", resp.StatusCode)
	}
	return resp.StatusCode, fmt.Errorf("HTTP %d", resp.StatusCode)
}

// reason is the fixed phrase of a transport error (url.Error would carry the URL, which may
// hold a token in its query).
func (c *client) reason(err error) error {
	var (
		dns *net.DNSError
		ne  net.Error
	)
	switch {
	case errors.Is(err, netpolicy.ErrAddressNotAllowed):
		return errors.New("destination address not allowed")
	case errors.Is(err, context.Canceled):
		return errors.New("canceled")
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("timeout after %s", c.timeout)
	case errors.As(err, &dns):
		return errors.New("host not found")
	case errors.Is(err, syscall.ECONNREFUSED):
		return errors.New("connection refused")
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("connection closed before an answer")
	}
	var (
		rec *tls.RecordHeaderError
		cv  *tls.CertificateVerificationError
	)
	if errors.As(err, &rec) || errors.As(err, &cv) {
		return errors.New("TLS handshake failed")
	}
	return errors.New("connection failed")
}

// backoffAfter is the delay before the next attempt after failures failed ones: backoff,
// doubled per further failure, at most maxBackoff.
func (s *Service) backoffAfter(failures int) time.Duration {
	d := s.cfg.Backoff
	for i := 1; i < failures && d < s.cfg.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, s.cfg.MaxBackoff)
}

// deliver is the deliverer's job: read the due deliveries, attempt each (at most concurrency
// at once, one per request and endpoint), until ctx ends or no enabled endpoint is left (then
// it calls done); it returns once the attempts in flight have. Retention runs beside it.
func (s *Service) deliver(ctx context.Context, done func()) {
	var (
		mu       sync.Mutex
		inflight = map[string]bool{} // webhook id / tx id
		// finished are the deliveries whose attempt ended since the current read began:
		// the read may have seen them pending still, and must not send them again.
		finished = map[int64]bool{}
		wg       sync.WaitGroup
		sem      = make(chan struct{}, s.cfg.Concurrency)
		wake     = make(chan struct{}, 1)
		counted  time.Time
		failing  bool // the last read of the outbox failed (logged once per outage)
	)
	defer wg.Wait()
	defer s.m.pending.Set(0)
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.pruneLoop(ctx)
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-timer.C:
		}
		mu.Lock()
		clear(finished)
		mu.Unlock()
		now := s.now()
		var (
			due  []store.WebhookDelivery
			idle bool
		)
		err := s.db.Read(ctx, func(tx *store.DBTx) error {
			var err error
			// Room for every free slot besides the ones in flight, which the query returns too.
			if due, err = tx.DueWebhookDeliveries(ctx, now, 2*s.cfg.Concurrency); err != nil {
				return err
			}
			if now.Sub(counted) >= time.Second {
				n, err := tx.PendingWebhookDeliveries(ctx)
				if err != nil {
					return err
				}
				if idle, err = tx.HasEnabledWebhooks(ctx); err != nil {
					return err
				}
				idle = !idle
				s.m.pending.Set(float64(n))
				counted = now
			}
			return nil
		})
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			s.log.Warn("webhook outbox not read; trying again every pollInterval", zap.Error(err))
		case err == nil && failing:
			failing = false
			s.log.Info("webhook outbox read again")
		}
		if idle {
			done() // the last endpoint is gone: stop, and give the lease up
			return
		}
	dispatch:
		for _, d := range due {
			k := d.WebhookID + "/" + strconv.FormatInt(d.Event.TxID, 10)
			mu.Lock()
			busy := inflight[k] || finished[d.ID]
			mu.Unlock()
			if busy {
				continue
			}
			select {
			case sem <- struct{}{}:
			default:
				break dispatch // every slot taken: a finished attempt wakes the loop
			}
			mu.Lock()
			inflight[k] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.attempt(ctx, d)
				mu.Lock()
				delete(inflight, k)
				finished[d.ID] = true
				mu.Unlock()
				<-sem
				select {
				case wake <- struct{}{}:
				default:
				}
			}()
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(s.cfg.PollInterval)
	}
}

// maxErrorLen bounds a delivery's last_error.
const maxErrorLen = 200

// attempt posts d once and records the outcome. An attempt cut short by ctx (shutdown, the
// lease lost) is not recorded: the delivery stays pending and is tried again, by this
// replica or the next holder.
func (s *Service) attempt(ctx context.Context, d store.WebhookDelivery) {
	ev := newEvent(d.Event)
	body, err := ev.body()
	if err != nil {
		s.log.Error("webhook event not encoded", zap.String("event", ev.ID), zap.Error(err))
		return
	}
	status, perr := s.client.post(ctx, d.URL, d.Secret, ev.ID, body, s.now())
	if ctx.Err() != nil {
		return
	}
	now := s.now()
	a := store.WebhookAttempt{At: now, Status: status}
	outcome := outcomeDelivered
	switch {
	case perr == nil:
		a.State = store.DeliveryDelivered
	case d.Attempts+1 >= s.cfg.MaxAttempts:
		a.State, a.Error, outcome = store.DeliveryDead, clipError(perr.Error()), outcomeDead
	default:
		a.State, a.Error, outcome = store.DeliveryPending, clipError(perr.Error()), outcomeFailed
		a.NextAttemptAt = now.Add(s.backoffAfter(d.Attempts + 1))
	}
	err = s.db.Write(ctx, func(tx *store.DBTx) error { return tx.FinishWebhookAttempt(ctx, d.ID, a) })
	switch {
	case errors.Is(err, store.ErrNotFound):
		return // finished meanwhile by another holder of the lease: theirs counts
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("webhook attempt not recorded: the delivery will be tried again", zap.Int64("delivery", d.ID), zap.Error(err))
		}
		return
	}
	s.m.deliveries.WithLabelValues(outcome).Inc()
	switch outcome {
	case outcomeDelivered:
		s.m.lag.Observe(max(now.Sub(d.Event.CreatedAt), 0).Seconds())
	case outcomeDead:
		s.log.Warn("webhook delivery dead: every attempt failed", zap.String("webhook", d.WebhookID), zap.Int64("delivery", d.ID),
			zap.String("event", ev.ID), zap.String("type", ev.Type), zap.Int("attempts", d.Attempts+1), zap.Int("status", status),
			zap.String("last_error", a.Error))
	}
}

func clipError(s string) string {
	if len(s) > maxErrorLen {
		return s[:maxErrorLen]
	}
	return s
}
