package config

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"

	"gopkg.in/yaml.v3"
)

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}\n]*))?\}`)

// envRefs are the ${NAME} and ${NAME:-default} references of a file, each replaced in the
// text by a placeholder before parsing (markEnvRefs) and by its value after (expandEnv).
type envRefs struct {
	prefix string   // of each placeholder: prefix + index + "_"
	refs   []string // the references as written
	holder *regexp.Regexp
}

// markEnvRefs replaces each reference in raw by a placeholder of letters, digits and
// underscores, which parses as part of any scalar (plain in a flow sequence as in
// `urls: [${URL}]`, quoted, or a block), so the file's structure is the same whatever the
// values are.
func markEnvRefs(raw []byte) ([]byte, *envRefs) {
	r := &envRefs{prefix: "__web3gate_env_"}
	for bytes.Contains(raw, []byte(r.prefix)) {
		r.prefix += "_"
	}
	r.holder = regexp.MustCompile(regexp.QuoteMeta(r.prefix) + `([0-9]+)_`)
	out := envRef.ReplaceAllFunc(raw, func(m []byte) []byte {
		r.refs = append(r.refs, string(m))
		return []byte(r.prefix + strconv.Itoa(len(r.refs)-1) + "_")
	})
	return out, r
}

// expandEnv puts the environment's values in every scalar of the parsed file, one value at
// a time after parsing: a value from the environment is the value as it is, and a password
// holding `"`, `#` or `: ` cannot change the file's structure. A ${NAME} that is not set
// (and has no default) is an error naming its key and line, not a silent empty string.
// References in comments are never read.
func expandEnv(doc *yaml.Node, refs *envRefs) error {
	if len(refs.refs) == 0 {
		return nil
	}
	var errs []error
	expand := func(n *yaml.Node, path string) {
		if n.Kind != yaml.ScalarNode || !refs.holder.MatchString(n.Value) {
			return
		}
		n.Value = refs.holder.ReplaceAllStringFunc(n.Value, func(m string) string {
			i, _ := strconv.Atoi(refs.holder.FindStringSubmatch(m)[1])
			sub := envRef.FindStringSubmatch(refs.refs[i])
			if v, ok := os.LookupEnv(sub[1]); ok {
				return v
			}
			if sub[2] != "" {
				return sub[3]
			}
			errs = append(errs, fmt.Errorf("line %d: %s: environment variable %s is not set", n.Line, displayPath(path), sub[1]))
			return refs.refs[i]
		})
		// A plain value is typed again from what it now holds (`mainnet: ${CHAIN_ID}` is
		// a number); a quoted one stays a string.
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle|yaml.TaggedStyle) == 0 {
			n.Tag = ""
		}
	}
	walkNodes(doc, "", func(n *yaml.Node, path string) {
		if n.Kind == yaml.MappingNode {
			for i := 0; i < len(n.Content); i += 2 {
				expand(n.Content[i], path) // a key
			}
		}
		expand(n, path)
	})
	return errors.Join(errs...)
}

// walkNodes calls fn on every node under n that holds a value, with its key path
// ("server.listen", "upstreams.chains[0].urls[1]"); mapping keys are not visited. Aliases
// are not followed (their anchor is visited where it stands).
func walkNodes(n *yaml.Node, path string, fn func(n *yaml.Node, path string)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			walkNodes(c, path, fn)
		}
		return
	case yaml.MappingNode:
		fn(n, path)
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkNodes(n.Content[i+1], joinPath(path, n.Content[i].Value), fn)
		}
		return
	case yaml.SequenceNode:
		fn(n, path)
		for i, c := range n.Content {
			walkNodes(c, path+"["+strconv.Itoa(i)+"]", fn)
		}
		return
	}
	fn(n, path)
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// displayPath is path for a message: the whole file is "(top level)".
func displayPath(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}
