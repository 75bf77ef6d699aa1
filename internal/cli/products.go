package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/web3gate/web3gate/products"
)

// productsImportCmd imports a catalog file: every product validated first, then all of them
// written in one store transaction (inserted, or replacing the product with the same id),
// or none when any is invalid.
type productsImportCmd struct {
	configFlag
	DryRun bool   `name:"dry-run" help:"Validate the file and write nothing."`
	File   string `arg:"" name:"FILE" help:"The catalog: .json, .yaml/.yml, or - for standard input."`
}

func (c *productsImportCmd) Run(ctx context.Context, env Env) error {
	var raw []byte
	var err error
	if c.File == "-" {
		raw, err = io.ReadAll(env.Stdin)
	} else {
		raw, err = os.ReadFile(c.File)
	}
	if err != nil {
		return fmt.Errorf("products import: %w", err)
	}
	ps, err := products.ParseFile(c.File, raw)
	if err != nil {
		var fe *products.FileError
		if errors.As(err, &fe) {
			return fmt.Errorf("products import %s: nothing imported, %d problem(s):\n  %s", c.File, len(fe.Problems),
				strings.Join(fe.Problems, "\n  "))
		}
		return err
	}
	if c.DryRun {
		fmt.Fprintf(env.Stdout, "%s: %d products, all valid (dry run: nothing written)\n", c.File, len(ps))
		return nil
	}
	ctx, s, done, err := openStore(ctx, c.Config, env.Stderr, 10*time.Minute)
	if err != nil {
		return err
	}
	defer done()
	sum, err := products.Import(ctx, s.db, ps)
	if err != nil {
		return fmt.Errorf("products import %s: nothing imported: %w", c.File, err)
	}
	fmt.Fprintf(env.Stdout, "%s: %d products imported: %s\n", c.File, len(ps), sum)
	return nil
}
