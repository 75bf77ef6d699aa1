package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
)

// checkKeys walks the parsed file against the type it is decoded into, and names each key
// that type does not have (with the nearest key it does have) and each duration written
// without a unit, by its key path and line. The decoder's own messages name a Go type
// ("field maxbatch not found in type proxy.Config"); these name the key the user wrote.
func checkKeys(doc *yaml.Node, t reflect.Type) []string {
	var problems []string
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
			n = n.Content[0]
		}
		if n.Kind == yaml.AliasNode && n.Alias != nil {
			n = n.Alias
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshalerType) {
			return // it reads its own node
		}
		switch {
		case t == durationType:
			if p := checkDuration(n, path); p != "" {
				problems = append(problems, p)
			}
		case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
			keys := yamlKeys(t)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				if k.Value == "<<" && k.Tag == "!!merge" {
					walk(v, t, path)
					continue
				}
				ft, ok := keys[k.Value]
				if !ok {
					problems = append(problems, unknownKey(k, path, keys))
					continue
				}
				walk(v, ft, joinPath(path, k.Value))
			}
		case (t.Kind() == reflect.Slice || t.Kind() == reflect.Array) && n.Kind == yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, t.Elem(), path+"["+strconv.Itoa(i)+"]")
			}
		case t.Kind() == reflect.Map && n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], t.Elem(), joinPath(path, n.Content[i].Value))
			}
		}
	}
	walk(doc, t, "")
	return problems
}

// yamlKeys are the keys of struct type t (inline structs' keys included), with the type of
// each.
func yamlKeys(t reflect.Type) map[string]reflect.Type {
	keys := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			for k, v := range yamlKeys(f.Type) {
				keys[k] = v
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		keys[name] = f.Type
	}
	return keys
}

// unknownKey is the message for key k, which the mapping at path does not have.
func unknownKey(k *yaml.Node, path string, keys map[string]reflect.Type) string {
	msg := fmt.Sprintf("line %d: %s: unknown key %q", k.Line, joinPath(path, k.Value), k.Value)
	if near := nearestKey(k.Value, keys); near != "" {
		return msg + fmt.Sprintf(", did you mean %q?", near)
	}
	names := make([]string, 0, len(keys))
	for name := range keys {
		names = append(names, name)
	}
	slices.Sort(names)
	return msg + fmt.Sprintf(" (the keys of %s: %s)", displayPath(path), strings.Join(names, ", "))
}

// nearestKey is the key of keys closest to s (case aside, by edit distance), when it is
// close enough to be a likely typo: 1 edit for a key of up to 3 letters, 2 up to 8, else 3.
func nearestKey(s string, keys map[string]reflect.Type) string {
	best, bestDist := "", 0
	for k := range keys {
		d := levenshtein(strings.ToLower(s), strings.ToLower(k))
		if best == "" || d < bestDist || d == bestDist && k < best {
			best, bestDist = k, d
		}
	}
	allowed := 3
	switch n := max(len(s), len(best)); {
	case n <= 3:
		allowed = 1
	case n <= 8:
		allowed = 2
	}
	if best == "" || bestDist > allowed {
		return ""
	}
	return best
}

// levenshtein is the edit distance between a and b (insertions, deletions, substitutions
// of bytes).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// checkDuration is the message for a duration value n that is not one, or "".
func checkDuration(n *yaml.Node, path string) string {
	if n.Kind != yaml.ScalarNode {
		return fmt.Sprintf("line %d: %s: must be a duration with a unit, e.g. \"5s\"", n.Line, path)
	}
	v := strings.TrimSpace(n.Value)
	if n.ShortTag() == "!!null" {
		return ""
	}
	if _, err := time.ParseDuration(v); err == nil {
		return ""
	}
	if isNumber(v) {
		return fmt.Sprintf("line %d: %s: %s is not a duration; write it with a unit, e.g. %q", n.Line, path, v, v+"s")
	}
	return fmt.Sprintf("line %d: %s: %q is not a duration; write it with a unit, e.g. \"5s\", \"250ms\", \"1m30s\"", n.Line, path, clip(v))
}

func isNumber(s string) bool {
	s = strings.ReplaceAll(s, "_", "")
	if _, err := strconv.ParseInt(s, 0, 64); err == nil {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

// clip shortens s for a message.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
