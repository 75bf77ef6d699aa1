// Package openapitest checks web3gate's HTTP answers against the OpenAPI document (package
// openapi), for the tests that talk to a whole server (integration/, e2e/). It is imported by
// tests only: the server does not link it.
//
// Check applies one rule to each answer, named in Result.Rule:
//
//   - RuleValidated: an operation of the document: the status must be one of its responses,
//     the headers it declares must be there when required and match their schemas, the
//     Content-Type must be a declared one and the body must match its schema; a response
//     declared without content must have an empty body.
//
// kin-openapi loads and validates the document (OpenAPI 3.1); the schemas are JSON Schema
// 2020-12, validated by the engine kin-openapi itself uses (santhosh-tekuri/jsonschema,
// formats asserted), each compiled once: openapi3filter.ValidateResponse compiles them anew
// at every answer, about 10 ms each, which slowed the tests that poll a route.
//   - RuleJSONRPC: an operation tagged JSON-RPC: skipped, the body is JSON-RPC (checked by
//     the tests' own assertions and transcripts).
//   - RuleNoPath: a path the document does not have on that listener must be no route of the
//     server: a 404 (the REST error object when it is JSON). Any other answer is a route the
//     document misses.
//   - RuleOtherMethod: a method the path does not document must be refused with 405 (the REST
//     error object when it is JSON); HEAD of a GET route is answered as GET without a body and
//     an OPTIONS preflight with 204.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/web3gate/web3gate/openapi"
)

// Listener is which of web3gate's two listeners answered.
type Listener int

const (
	Public Listener = iota // server.listen
	Admin                  // admin.listen
)

func (l Listener) String() string {
	if l == Admin {
		return "admin"
	}
	return "public"
}

// The rules of Check.
const (
	RuleValidated   = "validated"
	RuleJSONRPC     = "skipped: JSON-RPC"
	RuleNoPath      = "no such path: must be 404"
	RuleOtherMethod = "undocumented method: must be 405"
)

// Result says which rule Check applied, and to which operation.
type Result struct {
	Rule      string
	Operation string // the operationId; "" when no operation
}

// Checker checks answers against one document. It is safe for concurrent use.
type Checker struct {
	doc   *openapi3.T
	paths [2][]pathEntry // per listener

	// The schemas, compiled once per location of the document.
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema // by JSON pointer
}

type pathEntry struct {
	template string
	segs     []string // "" for a {param}
	item     *openapi3.PathItem
}

// New is a Checker of the embedded document (openapi.Full).
func New() (*Checker, error) { return NewFrom(openapi.Full()) }

// NewFrom is a Checker of the document doc (JSON or YAML): tests check that a changed copy
// of the document catches the drift it should.
func NewFrom(doc []byte) (*Checker, error) {
	loader := openapi3.NewLoader()
	t, err := loader.LoadFromData(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: load: %w", err)
	}
	if err := t.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: invalid document: %w", err)
	}
	if len(t.Servers) == 0 {
		return nil, fmt.Errorf("openapi: no servers: the first one is the public listener")
	}
	publicURL := t.Servers[0].URL
	c := &Checker{doc: t}
	for _, tmpl := range t.Paths.InMatchingOrder() {
		item := t.Paths.Value(tmpl)
		public, admin := len(item.Servers) == 0, false
		for _, s := range item.Servers {
			if s.URL == publicURL {
				public = true
			} else {
				admin = true
			}
		}
		e := newPathEntry(tmpl, item)
		if public {
			c.paths[Public] = append(c.paths[Public], e)
		}
		if admin {
			c.paths[Admin] = append(c.paths[Admin], e)
		}
	}
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	tree, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	c.compiler = jsonschema.NewCompiler()
	c.compiler.DefaultDraft(jsonschema.Draft2020)
	c.compiler.AssertFormat()
	if err := c.compiler.AddResource(docURL, tree); err != nil {
		return nil, fmt.Errorf("openapi: %w", err)
	}
	c.compiled = map[string]*jsonschema.Schema{}
	if _, err := c.schemaAt(errorSchema); err != nil {
		return nil, err
	}
	return c, nil
}

const (
	docURL      = "openapi.json"
	errorSchema = "/components/schemas/ErrorResponse"
)

// schemaAt is the schema at the JSON pointer ptr of the document, compiled once.
func (c *Checker) schemaAt(ptr string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.compiled[ptr]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + "#" + ptr)
	if err != nil {
		return nil, fmt.Errorf("openapi: the schema at %s: %w", ptr, err)
	}
	c.compiled[ptr] = s
	return s, nil
}

// pointer escapes JSON pointer tokens (RFC 6901).
func pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// validateAnswer checks an answer of op: its status is one of the operation's responses,
// the headers that response declares are there (when required) and match, and the body
// matches its declared content.
func (c *Checker) validateAnswer(where string, entry *pathEntry, method string, op *openapi3.Operation, status int, header http.Header, body []byte) error {
	key := strconv.Itoa(status)
	ref := op.Responses.Value(key)
	if ref == nil || ref.Value == nil {
		return fmt.Errorf("openapi: %s: status %d is not among the operation's responses", where, status)
	}
	base := pointer("paths", entry.template, strings.ToLower(method), "responses", key)
	if name, ok := strings.CutPrefix(ref.Ref, "#/components/responses/"); ok {
		base = pointer("components", "responses", name)
	}
	for name, h := range ref.Value.Headers {
		if h == nil || h.Value == nil {
			continue
		}
		vals, present := header[http.CanonicalHeaderKey(name)]
		if !present {
			if h.Value.Required {
				return fmt.Errorf("openapi: %s: no %s header, which the document requires", where, name)
			}
			continue
		}
		if h.Value.Schema == nil {
			continue
		}
		ptr := base + pointer("headers", name, "schema")
		if hname, ok := strings.CutPrefix(h.Ref, "#/components/headers/"); ok {
			ptr = pointer("components", "headers", hname, "schema")
		}
		sch, err := c.schemaAt(ptr)
		if err != nil {
			return err
		}
		if err := sch.Validate(strings.Join(vals, ", ")); err != nil {
			return fmt.Errorf("openapi: %s: header %s %q: %v", where, name, strings.Join(vals, ", "), err)
		}
	}
	content := ref.Value.Content
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("openapi: %s with a body, but the document declares none: %.200s", where, body)
		}
		return nil
	}
	ct := header.Get("Content-Type")
	mt := content.Get(ct)
	if mt == nil {
		return fmt.Errorf("openapi: %s: Content-Type %q is not declared", where, ct)
	}
	if mt.Schema == nil {
		return nil
	}
	var mtKey string
	for k, v := range content {
		if v == mt {
			mtKey = k
		}
	}
	sch, err := c.schemaAt(base + pointer("content", mtKey, "schema"))
	if err != nil {
		return err
	}
	var v any = string(body)
	if mtKey == "application/json" {
		if v, err = jsonschema.UnmarshalJSON(bytes.NewReader(body)); err != nil {
			return fmt.Errorf("openapi: %s: the body is not JSON: %v", where, err)
		}
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("openapi: %s: the body doesn't match the schema: %v; body %.300s", where, err, body)
	}
	return nil
}

func newPathEntry(tmpl string, item *openapi3.PathItem) pathEntry {
	e := pathEntry{template: tmpl, item: item}
	for _, s := range strings.Split(strings.TrimPrefix(tmpl, "/"), "/") {
		if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
			s = "" // a {param}
		}
		e.segs = append(e.segs, s)
	}
	return e
}

// match returns the path entry of path on the listener: of the templates that match, the one
// with the most literal segments.
func (c *Checker) match(l Listener, path string) *pathEntry {
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	var best *pathEntry
	bestLits := -1
	for i := range c.paths[l] {
		e := &c.paths[l][i]
		if len(e.segs) != len(parts) {
			continue
		}
		lits, ok := 0, true
		for j, s := range e.segs {
			switch {
			case s == "" && parts[j] != "":
			case s != "" && s == parts[j]:
				lits++
			default:
				ok = false
			}
		}
		if ok && lits > bestLits {
			best, bestLits = e, lits
		}
	}
	return best
}

// Check checks one answer of listener l to req (the request as sent: its method and URL).
// The error says what does not match, naming the operation.
func (c *Checker) Check(l Listener, req *http.Request, status int, header http.Header, body []byte) (Result, error) {
	path := req.URL.EscapedPath()
	entry := c.match(l, path)
	where := fmt.Sprintf("%s %s (%s listener) answered %d", req.Method, path, l, status)
	if entry == nil {
		if status != http.StatusNotFound {
			return Result{Rule: RuleNoPath}, fmt.Errorf("openapi: %s, but openapi/openapi.yaml has no such path on the %s listener: a route the document misses", where, l)
		}
		return Result{Rule: RuleNoPath}, c.checkError(where, header, body)
	}
	op := entry.item.GetOperation(req.Method)
	if op == nil {
		res := Result{Rule: RuleOtherMethod}
		switch {
		case req.Method == http.MethodHead && entry.item.Get != nil:
			if len(body) > 0 {
				return res, fmt.Errorf("openapi: %s with a body", where)
			}
			return res, nil
		case req.Method == http.MethodOptions && status == http.StatusNoContent:
			return res, nil // a CORS preflight
		case status != http.StatusMethodNotAllowed:
			return res, fmt.Errorf("openapi: %s, but the document has no %s operation at %s: an operation it misses", where, req.Method, entry.template)
		}
		return res, c.checkError(where, header, body)
	}
	res := Result{Rule: RuleValidated, Operation: op.OperationID}
	if jsonRPC(op) {
		return Result{Rule: RuleJSONRPC, Operation: op.OperationID}, nil
	}
	where = fmt.Sprintf("%s (operation %s)", where, op.OperationID)
	return res, c.validateAnswer(where, entry, req.Method, op, status, header, body)
}

// JSONRPC reports whether req, sent to listener l, is for an operation tagged JSON-RPC:
// its answer is not Check's to validate.
func (c *Checker) JSONRPC(l Listener, req *http.Request) bool {
	entry := c.match(l, req.URL.EscapedPath())
	if entry == nil {
		return false
	}
	op := entry.item.GetOperation(req.Method)
	return op != nil && jsonRPC(op)
}

// jsonRPC reports whether op is tagged JSON-RPC.
func jsonRPC(op *openapi3.Operation) bool {
	for _, t := range op.Tags {
		if t == "JSON-RPC" {
			return true
		}
	}
	return false
}

// checkError checks that a JSON body is the REST error object.
func (c *Checker) checkError(where string, header http.Header, body []byte) error {
	mt, _, _ := mime.ParseMediaType(header.Get("Content-Type"))
	if mt != "application/json" {
		return nil // net/http's own plain-text answers on the admin listener
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("openapi: %s: the body is not JSON: %v", where, err)
	}
	sch, err := c.schemaAt(errorSchema)
	if err != nil {
		return err
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("openapi: %s: not the REST error object (ErrorResponse): %v; body %.300s", where, err, body)
	}
	return nil
}
