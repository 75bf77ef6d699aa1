package cli

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
)

// hashTokenCmd prints the SHA-256 of the token read from standard input, for the sha256 of
// auth.tokens and admin.tokens: `web3gate auth hash-token < token`. The token never goes on
// the command line.
type hashTokenCmd struct{}

func (hashTokenCmd) Run(_ context.Context, env Env) error {
	line, err := bufio.NewReader(env.Stdin).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read token: %w", err)
	}
	tok := strings.TrimRight(line, "\r\n")
	if tok == "" {
		return usageError{errors.New("auth hash-token: give the token on standard input")}
	}
	h := sha256.Sum256([]byte(tok))
	fmt.Fprintln(env.Stdout, hex.EncodeToString(h[:]))
	return nil
}
