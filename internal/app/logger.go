package app

import (
	"fmt"
	"io"
	"os"

	"github.com/mattn/go-isatty"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The log formats of log.format.
const (
	LogFormatAuto    = "auto"    // console on a terminal, else JSON
	LogFormatConsole = "console" // zap's console encoder: time, level, logger, message, then the fields as JSON
	LogFormatJSON    = "json"    // one JSON object a line
)

// NewLogger is the process's root logger at level on w, each line with the replica id (field
// replica), in the format log.format auto picks: console when w is a terminal, JSON
// otherwise. The command line commands log through it.
func NewLogger(level, replica string, w io.Writer) (*zap.Logger, error) {
	return NewLoggerFormat(level, LogFormatAuto, replica, w, IsTerminal(w))
}

// NewLoggerFormat is NewLogger in format (LogFormatAuto, LogFormatConsole or LogFormatJSON);
// tty says whether w is a terminal: it decides what auto means, and whether the console's
// levels are coloured.
func NewLoggerFormat(level, format, replica string, w io.Writer, tty bool) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, err
	}
	enc := zap.NewProductionEncoderConfig()
	enc.TimeKey = "ts"
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	var encoder zapcore.Encoder
	switch format {
	case LogFormatJSON:
		encoder = zapcore.NewJSONEncoder(enc)
	case LogFormatAuto, "":
		if !tty {
			encoder = zapcore.NewJSONEncoder(enc)
			break
		}
		fallthrough
	case LogFormatConsole:
		enc.EncodeLevel = zapcore.CapitalLevelEncoder
		if tty {
			enc.EncodeLevel = zapcore.CapitalColorLevelEncoder
		}
		enc.EncodeDuration = zapcore.StringDurationEncoder
		encoder = zapcore.NewConsoleEncoder(enc)
	default:
		return nil, fmt.Errorf("log format %q is not one of auto, console, json", format)
	}
	core := zapcore.NewCore(encoder, zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core).With(zap.String("replica", replica)), nil
}

// IsTerminal reports whether w is a terminal (a character device a person reads): an
// *os.File on one. Anything else (a pipe, a file, a buffer) is not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fd := f.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}
