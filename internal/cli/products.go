package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/web3gate/web3gate/products"
)

const productsUsage = `usage:
  web3gate products import [--dry-run] [--config FILE] FILE   (FILE: .json, .yaml/.yml, or - for standard input)`

// productsCmd imports catalog files: every product validated first, then all of them
// written in one store transaction (inserted, or replacing the product with the same id),
// or none when any is invalid.
func productsCmd(ctx context.Context, env Env, args []string) error {
	stdin, stdout, stderr := env.Stdin, env.Stdout, env.Stderr
	if len(args) == 0 || args[0] != "import" {
		return usageError{errors.New(productsUsage)}
	}
	fs := flag.NewFlagSet("web3gate products import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "configuration file")
	dryRun := fs.Bool("dry-run", false, "validate the file and write nothing")
	positional, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return usageErrorOf(err)
	}
	if len(positional) != 1 {
		return usageError{fmt.Errorf("products import: give one catalog file\n%s", productsUsage)}
	}
	file := positional[0]
	var raw []byte
	if file == "-" {
		raw, err = io.ReadAll(stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return fmt.Errorf("products import: %w", err)
	}
	ps, err := products.ParseFile(file, raw)
	if err != nil {
		var fe *products.FileError
		if errors.As(err, &fe) {
			return fmt.Errorf("products import %s: nothing imported, %d problem(s):\n  %s", file, len(fe.Problems),
				strings.Join(fe.Problems, "\n  "))
		}
		return err
	}
	if *dryRun {
		fmt.Fprintf(stdout, "%s: %d products, all valid (dry run: nothing written)\n", file, len(ps))
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	_, db, _, err := openStore(ctx, *cfgPath, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	sum, err := products.Import(ctx, db, ps)
	if err != nil {
		return fmt.Errorf("products import %s: nothing imported: %w", file, err)
	}
	fmt.Fprintf(stdout, "%s: %d products imported: %s\n", file, len(ps), sum)
	return nil
}
