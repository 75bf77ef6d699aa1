package products

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// FileError lists every problem of a catalog file, each naming the element and the field.
type FileError struct {
	Problems []string
}

func (e *FileError) Error() string { return strings.Join(e.Problems, "\n") }

// ParseFile reads a catalog file: a list of Product objects, or an object whose only member
// is that list, {"products": [...]}, in JSON or YAML. A file name ending .json is JSON, .yaml
// or .yml YAML; any other (such as "-" for standard input) is JSON when its first non-blank
// byte is [ or {, else YAML. A YAML document is turned into the JSON it spells, scalars as
// written (a date stays the text it is), so that both formats go through the same strict
// Parse. Every element is checked, and so is that no id appears twice; any problem makes the
// whole file an error (a *FileError listing them all), so that an import writes nothing.
func ParseFile(name string, raw []byte) ([]*Product, error) {
	var (
		elems []element
		err   error
	)
	switch ext := strings.ToLower(filepath.Ext(name)); {
	case ext == ".json":
		elems, err = jsonElements(raw)
	case ext == ".yaml" || ext == ".yml":
		elems, err = yamlElements(raw)
	default:
		if t := bytes.TrimSpace(raw); len(t) > 0 && (t[0] == '[' || t[0] == '{') {
			elems, err = jsonElements(raw)
		} else {
			elems, err = yamlElements(raw)
		}
	}
	if err != nil {
		return nil, &FileError{Problems: []string{err.Error()}}
	}
	if len(elems) == 0 {
		return nil, &FileError{Problems: []string{"the file holds no products"}}
	}
	var (
		problems []string
		out      = make([]*Product, 0, len(elems))
		ids      = map[string]int{}
	)
	for i, e := range elems {
		where := fmt.Sprintf("products[%d]", i)
		if e.line > 0 {
			where += fmt.Sprintf(" (line %d)", e.line)
		}
		if e.err != nil {
			problems = append(problems, where+": "+e.err.Error())
			continue
		}
		p, err := Parse(e.json)
		if err != nil {
			problems = append(problems, where+": "+err.Error())
			continue
		}
		if j, dup := ids[p.ID]; dup {
			problems = append(problems, fmt.Sprintf("%s: id: %s is also the id of products[%d]", where, p.ID, j))
			continue
		}
		ids[p.ID] = i
		out = append(out, p)
	}
	if len(problems) > 0 {
		return nil, &FileError{Problems: problems}
	}
	return out, nil
}

// element is one product of a file, as JSON, or why it could not be turned into JSON.
type element struct {
	json []byte
	line int // YAML: the line it starts on
	err  error
}

func jsonElements(raw []byte) ([]element, error) {
	var list []json.RawMessage
	t := bytes.TrimSpace(raw)
	switch {
	case len(t) == 0:
		return nil, errors.New("the file is empty")
	case t[0] == '[':
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, jsonError(raw, err)
		}
	case t[0] == '{':
		var top map[string]json.RawMessage
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, jsonError(raw, err)
		}
		if err := onlyProducts(keys(top)); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(top["products"], &list); err != nil {
			return nil, errors.New("products: must be a list of products")
		}
	default:
		return nil, errors.New(`the file must hold a list of products, or an object {"products": [...]}`)
	}
	elems := make([]element, len(list))
	for i, m := range list {
		elems[i] = element{json: m}
	}
	return elems, nil
}

func keys(m map[string]json.RawMessage) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func onlyProducts(keys []string) error {
	for _, k := range keys {
		if k != "products" {
			return fmt.Errorf("%s: unknown field (the object holds only products)", k)
		}
	}
	if len(keys) == 0 {
		return errors.New(`products: required (the file holds a list, or an object {"products": [...]})`)
	}
	return nil
}

// jsonError places a JSON syntax error by line and column.
func jsonError(raw []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off := int(min(se.Offset, int64(len(raw))))
		line := 1 + bytes.Count(raw[:off], []byte("\n"))
		col := off - bytes.LastIndexByte(raw[:off], '\n')
		return fmt.Errorf("not valid JSON: line %d, column %d: %s", line, col, se.Error())
	}
	return fmt.Errorf("not valid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func yamlElements(raw []byte) ([]element, error) {
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty")
		}
		return nil, fmt.Errorf("not valid YAML: %s", strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, errors.New("not one YAML document: the file must hold one list of products")
	}
	top := &doc
	if top.Kind == yaml.DocumentNode && len(top.Content) == 1 {
		top = top.Content[0]
	}
	list := top
	if top.Kind == yaml.MappingNode {
		var ks []string
		list = nil
		for i := 0; i+1 < len(top.Content); i += 2 {
			ks = append(ks, top.Content[i].Value)
			if top.Content[i].Value == "products" {
				list = top.Content[i+1]
			}
		}
		if err := onlyProducts(ks); err != nil {
			return nil, fmt.Errorf("line %d: %w", top.Line, err)
		}
	}
	if list.Kind != yaml.SequenceNode {
		return nil, fmt.Errorf(`line %d: the file must hold a list of products, or an object {"products": [...]}`, list.Line)
	}
	elems := make([]element, len(list.Content))
	for i, n := range list.Content {
		elems[i].line = n.Line
		var b bytes.Buffer
		if err := appendJSON(&b, n); err != nil {
			elems[i].err = err
			continue
		}
		elems[i].json = b.Bytes()
	}
	return elems, nil
}

// appendJSON writes the JSON of a YAML node. Scalars keep their text: a timestamp stays the
// string it is written as (Parse then checks it is RFC 3339, as in JSON). Anchors and
// aliases are refused: a catalog has no use for them, and expanding them can make a small
// file huge.
func appendJSON(b *bytes.Buffer, n *yaml.Node) error {
	if n.Anchor != "" || n.Kind == yaml.AliasNode {
		return fmt.Errorf("line %d: YAML anchors and aliases are not supported", n.Line)
	}
	switch n.Kind {
	case yaml.MappingNode:
		b.WriteByte('{')
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return fmt.Errorf("line %d: a key must be a string", k.Line)
			}
			if seen[k.Value] {
				return fmt.Errorf("line %d: %s: given twice", k.Line, k.Value)
			}
			seen[k.Value] = true
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSONString(b, k.Value)
			b.WriteByte(':')
			if err := appendJSON(b, n.Content[i+1]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := appendJSON(b, c); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		return appendScalar(b, n)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}

func appendScalar(b *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		b.WriteString("null")
	case "!!bool":
		var v bool
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %q is not a boolean", n.Line, n.Value)
		}
		b.WriteString(strconv.FormatBool(v))
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("line %d: %s: integer out of range", n.Line, n.Value)
		}
		b.WriteString(strconv.FormatInt(v, 10))
	case "!!float":
		var v float64
		if err := n.Decode(&v); err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("line %d: %s: not a finite number", n.Line, n.Value)
		}
		b.WriteString(strconv.FormatFloat(v, 'g', -1, 64))
	case "!!str", "!!timestamp":
		writeJSONString(b, n.Value)
	default:
		return fmt.Errorf("line %d: YAML tag %s is not supported", n.Line, n.ShortTag())
	}
	return nil
}

func writeJSONString(b *bytes.Buffer, s string) {
	q, _ := json.Marshal(s) // a string always encodes
	b.Write(q)
}
