//go:build !nodevchain

package devchain

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHandler is a slog.Handler that writes records at or above min to a zap logger. It is
// given to go-ethereum as the node-scoped logger (node.Config.Logger), so the node's own
// warnings and errors reach our logs without touching go-ethereum's global root logger.
type zapHandler struct {
	logger *zap.Logger
	min    slog.Level
	prefix string // group prefix for attribute keys, "" or ending in "."
}

var _ slog.Handler = (*zapHandler)(nil)

func newZapHandler(logger *zap.Logger, min slog.Level) *zapHandler {
	return &zapHandler{logger: logger, min: min}
}

func (h *zapHandler) Enabled(_ context.Context, level slog.Level) bool {
	return level >= h.min && h.logger.Core().Enabled(zapLevel(level))
}

func (h *zapHandler) Handle(_ context.Context, r slog.Record) error {
	ce := h.logger.Check(zapLevel(r.Level), r.Message)
	if ce == nil {
		return nil
	}
	fields := make([]zap.Field, 0, r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.prefix, a)
		return true
	})
	ce.Write(fields...)
	return nil
}

func (h *zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	fields := make([]zap.Field, 0, len(attrs))
	for _, a := range attrs {
		fields = appendAttr(fields, h.prefix, a)
	}
	c := *h
	c.logger = h.logger.With(fields...)
	return &c
}

func (h *zapHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// appendAttr flattens groups into dotted keys.
func appendAttr(fields []zap.Field, prefix string, a slog.Attr) []zap.Field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, ga := range v.Group() {
			fields = appendAttr(fields, p, ga)
		}
		return fields
	}
	if a.Key == "" {
		return fields
	}
	return append(fields, zap.Any(prefix+a.Key, v.Any()))
}

// zapLevel maps slog levels, including go-ethereum's trace (-8) and crit (12), onto zap.
// Crit becomes Error: a library must not end the process through the logger.
func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	case l >= slog.LevelInfo:
		return zapcore.InfoLevel
	default:
		return zapcore.DebugLevel
	}
}
