package store

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text columns. PostgreSQL refuses text holding a NUL character or bytes that are not UTF-8;
// SQLite would store either. So that both backends accept exactly the same writes, the store
// refuses such text on both (ErrInvalidText) where it names something (an owner, a principal,
// an id, a key), and replaces the offending bytes with U+FFFD in free text whose exact bytes
// matter to nobody (the error of a transaction, which may quote a node's message). A lookup by
// such a value finds nothing, on both, without asking the database.

// ErrInvalidText: a text value holds a NUL character or is not valid UTF-8.
var ErrInvalidText = errors.New("text must be valid UTF-8 without NUL characters")

// validText reports whether s can be stored in a text column of either backend.
func validText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// CheckText is nil when s can be stored as text, else ErrInvalidText naming what (its
// value is not quoted: it may be anything).
func CheckText(what, s string) error {
	if validText(s) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, ErrInvalidText)
}

// checkTexts is CheckText of pairs what, value.
func checkTexts(pairs ...string) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		if err := CheckText(pairs[i], pairs[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// cleanText is s with every NUL and every invalid UTF-8 sequence replaced by U+FFFD.
func cleanText(s string) string {
	if validText(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
