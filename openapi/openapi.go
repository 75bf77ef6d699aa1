// Package openapi holds the OpenAPI 3.1 contract of web3gate's REST routes (openapi.yaml,
// embedded) and serves it as JSON: the whole document on the admin listener, the part of the
// public listener's routes on the public listener.
//
// A path belongs to the admin listener when it names servers of its own and none of them is
// the document's first server (the public listener); /openapi.json, served on both, names
// both. The public document keeps the other paths, the webhooks, and only the components,
// tags and security schemes they use.
package openapi

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

//go:embed openapi.yaml
var source []byte

var docs = sync.OnceValues(func() (*docPair, error) {
	full, err := parse(source)
	if err != nil {
		return nil, err
	}
	pub, err := public(full)
	if err != nil {
		return nil, err
	}
	f, err := full.MarshalJSON()
	if err != nil {
		return nil, err
	}
	p, err := pub.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &docPair{full: f, public: p}, nil
})

type docPair struct{ full, public []byte }

// must returns the documents. The embedded file is fixed at build time and this package's
// tests convert it, so a failure here is a broken build, not a condition to handle.
func must() *docPair {
	d, err := docs()
	if err != nil {
		panic(fmt.Sprintf("openapi: the embedded openapi.yaml: %v", err))
	}
	return d
}

// YAML returns the document as written (a copy).
func YAML() []byte { return append([]byte(nil), source...) }

// Full returns the whole document as JSON, every route of both listeners (a copy).
func Full() []byte { return append([]byte(nil), must().full...) }

// Public returns the document of the public listener as JSON: its routes only (a copy).
func Public() []byte { return append([]byte(nil), must().public...) }

// parse reads YAML into ordered JSON values (*object, []any, string, float64/int64, bool,
// nil), keeping the order of the mappings so that the JSON reads as the YAML does.
func parse(src []byte) (*object, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(src, &root); err != nil {
		return nil, err
	}
	v, err := value(&root)
	if err != nil {
		return nil, err
	}
	o, ok := v.(*object)
	if !ok {
		return nil, fmt.Errorf("the document is not a mapping")
	}
	return o, nil
}

func value(n *yaml.Node) (any, error) {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) != 1 {
			return nil, fmt.Errorf("line %d: one document expected", n.Line)
		}
		return value(n.Content[0])
	case yaml.AliasNode:
		return value(n.Alias)
	case yaml.MappingNode:
		o := &object{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return nil, fmt.Errorf("line %d: keys must be plain strings", k.Line)
			}
			if o.has(k.Value) {
				return nil, fmt.Errorf("line %d: duplicate key %q", k.Line, k.Value)
			}
			v, err := value(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			o.set(k.Value, v)
		}
		return o, nil
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := value(c)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str", "!!timestamp", "!!binary":
			return n.Value, nil
		case "!!null":
			return nil, nil
		case "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
			return v, nil
		}
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node (kind %d, tag %s)", n.Line, n.Kind, n.Tag)
}

// public is the public listener's part of full (which it does not change).
func public(full *object) (*object, error) {
	publicURL, err := firstServerURL(full)
	if err != nil {
		return nil, err
	}
	paths, _ := full.get("paths").(*object)
	if paths == nil {
		return nil, fmt.Errorf("no paths")
	}
	kept := &object{}
	for _, p := range paths.keys {
		item, _ := paths.get(p).(*object)
		if item == nil {
			return nil, fmt.Errorf("paths.%s: not a mapping", p)
		}
		if !servedBy(item, publicURL) {
			continue
		}
		if item.has("servers") {
			item = item.without("servers") // the document's own server, the public listener
		}
		kept.set(p, item)
	}
	out := &object{}
	for _, k := range full.keys {
		switch k {
		case "paths":
			out.set(k, kept)
		case "components", "tags":
		default:
			out.set(k, full.get(k))
		}
	}
	// The components the kept parts use, directly or through other components.
	used := map[string]bool{}
	var walk func(v any)
	comps, _ := full.get("components").(*object)
	walk = func(v any) {
		switch v := v.(type) {
		case *object:
			for _, k := range v.keys {
				if ref, ok := v.get(k).(string); ok && k == "$ref" {
					name, ok := strings.CutPrefix(ref, "#/components/")
					if ok && !used[name] {
						used[name] = true
						section, item, _ := strings.Cut(name, "/")
						if s, _ := comps.get(section).(*object); s != nil {
							walk(s.get(item))
						}
					}
					continue
				}
				if k == "security" {
					for _, req := range asSlice(v.get(k)) {
						if r, ok := req.(*object); ok {
							for _, scheme := range r.keys {
								used["securitySchemes/"+scheme] = true
							}
						}
					}
				}
				walk(v.get(k))
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(out)
	if comps != nil {
		c := &object{}
		for _, section := range comps.keys {
			s, _ := comps.get(section).(*object)
			if s == nil {
				continue
			}
			keep := &object{}
			for _, name := range s.keys {
				if used[section+"/"+name] {
					keep.set(name, s.get(name))
				}
			}
			if len(keep.keys) > 0 {
				c.set(section, keep)
			}
		}
		out.set("components", c)
	}
	// The tags of the kept operations, in the document's order.
	tagged := map[string]bool{}
	for _, group := range []*object{kept, asObject(out.get("webhooks"))} {
		for _, p := range group.keysOrNone() {
			item := asObject(group.get(p))
			for _, m := range item.keysOrNone() {
				for _, t := range asSlice(asObject(item.get(m)).get("tags")) {
					if s, ok := t.(string); ok {
						tagged[s] = true
					}
				}
			}
		}
	}
	var tags []any
	for _, t := range asSlice(full.get("tags")) {
		if name, _ := asObject(t).get("name").(string); tagged[name] {
			tags = append(tags, t)
		}
	}
	// The order of the document's top-level keys: tags after servers, as written.
	ordered := &object{}
	for _, k := range full.keys {
		switch {
		case k == "tags":
			ordered.set(k, tags)
		case out.has(k):
			ordered.set(k, out.get(k))
		}
	}
	return ordered, nil
}

// servedBy reports whether the public listener (url) serves a path item: it names no servers
// of its own, or names that one among them.
func servedBy(item *object, url string) bool {
	if !item.has("servers") {
		return true
	}
	for _, s := range asSlice(item.get("servers")) {
		if u, _ := asObject(s).get("url").(string); u == url {
			return true
		}
	}
	return false
}

func firstServerURL(doc *object) (string, error) {
	servers := asSlice(doc.get("servers"))
	if len(servers) == 0 {
		return "", fmt.Errorf("no servers: the first one is the public listener")
	}
	u, _ := asObject(servers[0]).get("url").(string)
	if u == "" {
		return "", fmt.Errorf("servers[0] has no url")
	}
	return u, nil
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

func asObject(v any) *object {
	o, _ := v.(*object)
	return o
}
