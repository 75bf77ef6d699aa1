package txmgr

// Tracing (tracing.enabled): the send path of a traced request as spans, txmgr.send (or
// txmgr.sign_transaction) holding txmgr.check, txmgr.reserve, txmgr.sign, txmgr.persist
// and txmgr.broadcast; the upstream calls they make are the pool's spans beneath them.
// The confirmers' work is not traced. Off, Manager.tracer is nil.

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/web3gate/web3gate/internal/tracing"
	"github.com/web3gate/web3gate/store"
)

// startSpan starts a span of the send path named name, with the transaction rec (nil:
// none yet); nil when tracing is off or ctx's span is not recording.
func (t *Manager) startSpan(ctx context.Context, name string, rec *store.TxRecord) (context.Context, trace.Span) {
	if t.tracer == nil {
		return ctx, nil
	}
	ctx, span := tracing.Start(ctx, t.tracer, name)
	if span != nil && rec != nil {
		recordTx(span, rec)
	}
	return ctx, span
}

// recordTx adds the transaction's row id, sender and nonce to span; never its fields or
// signed bytes.
func recordTx(span trace.Span, rec *store.TxRecord) {
	span.SetAttributes(
		attribute.Int64("web3gate.tx.id", rec.ID),
		attribute.String("web3gate.tx.from", rec.Address.Hex()),
		attribute.Int64("web3gate.tx.nonce", int64(rec.Nonce)))
}
