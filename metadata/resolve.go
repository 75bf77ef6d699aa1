package metadata

import (
	"context"
	"encoding/base64"
	"net/url"
	"slices"
	"strings"
)

// Resolver turns a token or contract URI as published on chain into its JSON document:
// http(s) URLs, IPFS (ipfs://, ipns://, /ipfs/ paths and other gateways' URLs, through the
// configured gateways), Arweave (ar://), data: URIs and raw JSON in place of a URI.
type Resolver struct {
	fetcher  *Fetcher
	ipfs     []string // gateway prefixes ending in "/", e.g. "https://ipfs.io/ipfs/"
	ipns     []string // the same gateways' /ipns/ prefixes, where derivable
	arweave  string   // base URL without a trailing "/"
	maxBytes int64    // cap of in-process documents (data: URIs, raw JSON)
}

// NewResolver builds a Resolver. ipfsGateways are URL prefixes tried in order, to which
// "<cid>[/path]" is appended (e.g. "https://ipfs.io/ipfs/"); a prefix ending in "/ipfs/" also
// serves ipns:// names through its "/ipns/". arweaveGateway is a base URL to which
// "/<txid>[/path]" is appended. maxBytes caps documents decoded in-process (data: URIs).
func NewResolver(f *Fetcher, ipfsGateways []string, arweaveGateway string, maxBytes int64) *Resolver {
	r := &Resolver{
		fetcher:  f,
		arweave:  strings.TrimRight(arweaveGateway, "/"),
		maxBytes: maxBytes,
	}
	if r.maxBytes <= 0 {
		r.maxBytes = 1 << 20
	}
	for _, g := range ipfsGateways {
		if g == "" {
			continue
		}
		if !strings.HasSuffix(g, "/") {
			g += "/"
		}
		r.ipfs = append(r.ipfs, g)
		if base, ok := strings.CutSuffix(g, "/ipfs/"); ok {
			r.ipns = append(r.ipns, base+"/ipns/")
		}
	}
	return r
}

// Resolve returns the JSON object document uri points to. Every error is a *FetchError;
// when several gateways were tried, it is the error of the last attempt.
func (r *Resolver) Resolve(ctx context.Context, uri string) ([]byte, error) {
	uri = strings.TrimSpace(uri)
	if uri == "" {
		return nil, failure(reasonNoURI)
	}
	if uri[0] == '{' {
		return r.inProcess([]byte(uri))
	}
	if strings.HasPrefix(uri, "/ipfs/") || strings.HasPrefix(uri, "/ipns/") {
		return r.contentAddressed(ctx, uri[1:5], uri[6:], "")
	}
	scheme, rest, ok := strings.Cut(uri, ":")
	if !ok {
		return nil, failure(reasonScheme)
	}
	switch strings.ToLower(scheme) {
	case "http", "https":
		return r.web(ctx, uri)
	case "ipfs":
		rest, ok := strings.CutPrefix(rest, "//")
		if !ok {
			return nil, failure(reasonInvalidURI)
		}
		if p, ok := cutPrefixFold(rest, "ipfs/"); ok {
			rest = p // ipfs://ipfs/<cid>
		}
		return r.contentAddressed(ctx, "ipfs", rest, "")
	case "ipns":
		rest, ok := strings.CutPrefix(rest, "//")
		if !ok {
			return nil, failure(reasonInvalidURI)
		}
		return r.contentAddressed(ctx, "ipns", rest, "")
	case "ar":
		rest, ok := strings.CutPrefix(rest, "//")
		if !ok {
			return nil, failure(reasonInvalidURI)
		}
		return r.arweaveDoc(ctx, rest)
	case "data":
		doc, err := decodeDataURI(rest, r.maxBytes)
		if err != nil {
			return nil, err
		}
		return r.inProcess(doc)
	}
	return nil, failure(reasonScheme)
}

// web fetches an http(s) URL; one that is another IPFS gateway's (a /ipfs/<cid> path, or a
// subdomain gateway's <cid>.ipfs.<domain> host) goes to the configured gateways first.
func (r *Resolver) web(ctx context.Context, raw string) ([]byte, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil, failure(reasonInvalidURI)
	}
	p := u.EscapedPath()
	for _, ns := range []string{"ipfs", "ipns"} {
		if rest, ok := strings.CutPrefix(p, "/"+ns+"/"); ok {
			return r.contentAddressed(ctx, ns, rest, raw)
		}
	}
	if label, domain, ok := strings.Cut(u.Hostname(), "."); ok {
		if _, ok := cutPrefixFold(domain, "ipfs."); ok && isSubdomainCID(label) {
			return r.contentAddressed(ctx, "ipfs", label+p, raw)
		}
	}
	return r.fetcher.Fetch(ctx, raw)
}

// contentAddressed fetches "<cid|name>[/path]" of namespace ns (ipfs or ipns) through the
// configured gateways in order, then original (when not empty) as the last resort.
func (r *Resolver) contentAddressed(ctx context.Context, ns, rest, original string) ([]byte, error) {
	id, path := splitID(rest)
	valid := isCID(id)
	if ns == "ipns" {
		valid = isIPNSName(id)
	}
	if !valid || !cleanPath(path) {
		if original != "" {
			return r.fetcher.Fetch(ctx, original)
		}
		return nil, failure(reasonInvalidURI)
	}
	gateways := r.ipfs
	if ns == "ipns" {
		gateways = r.ipns
	}
	urls := make([]string, 0, len(gateways)+1)
	for _, g := range gateways {
		urls = append(urls, g+id+path)
	}
	if original != "" && !slices.Contains(urls, original) {
		urls = append(urls, original)
	}
	return r.firstOf(ctx, urls)
}

// arweaveDoc fetches "<txid>[/path]" through the Arweave gateway.
func (r *Resolver) arweaveDoc(ctx context.Context, rest string) ([]byte, error) {
	id, path := splitID(rest)
	if !isArweaveID(id) || !cleanPath(path) {
		return nil, failure(reasonInvalidURI)
	}
	if r.arweave == "" {
		return nil, failure(reasonNoGateway)
	}
	return r.fetcher.Fetch(ctx, r.arweave+"/"+id+path)
}

// firstOf fetches urls in order until one answers; the error is the last attempt's.
func (r *Resolver) firstOf(ctx context.Context, urls []string) ([]byte, error) {
	err := error(failure(reasonNoGateway))
	for _, u := range urls {
		var doc []byte
		doc, err = r.fetcher.Fetch(ctx, u)
		if err == nil {
			return doc, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	return nil, err
}

// inProcess checks a document that did not come over the network.
func (r *Resolver) inProcess(doc []byte) ([]byte, error) {
	if int64(len(doc)) > r.maxBytes {
		return nil, failure(reasonTooLarge)
	}
	return jsonObject(doc)
}

// splitID splits "<id>[/path][?query][#fragment]" into the id and the rest ("" or starting
// with "/", "?" or "#"); a fragment is dropped.
func splitID(s string) (id, rest string) {
	s, _, _ = strings.Cut(s, "#")
	i := strings.IndexAny(s, "/?")
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i:]
}

// cleanPath reports whether path (as appended to a gateway prefix) stays under the id: no
// "." or ".." segment, escaped or not, and no backslash.
func cleanPath(path string) bool {
	p, _, _ := strings.Cut(path, "?")
	if strings.Contains(p, `\`) {
		return false
	}
	for seg := range strings.SplitSeq(p, "/") {
		if u, err := url.PathUnescape(seg); err == nil {
			seg = u
		}
		if seg == "." || seg == ".." || strings.ContainsAny(seg, `/\`) {
			return false
		}
	}
	return true
}

// isCID reports whether s looks like a CID: CIDv0 (base58btc "Qm...") or a CIDv1 in a
// multibase alphabet of letters and digits.
func isCID(s string) bool {
	if len(s) < 8 || len(s) > 128 {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) {
			return false
		}
	}
	return true
}

// isSubdomainCID reports whether a host name label is a CIDv1 as subdomain gateways write
// it (base32 "b..." or base36 "k...", lowercase): long enough not to be a mere name such as
// "metadata".ipfs.example.com.
func isSubdomainCID(s string) bool {
	return len(s) >= 50 && (s[0] == 'b' || s[0] == 'k') && isCID(s)
}

// isIPNSName reports whether s is an IPNS key (a CID) or a DNSLink domain name.
func isIPNSName(s string) bool {
	if s == "" || len(s) > 253 || s[0] == '.' || strings.Contains(s, "..") {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

// isArweaveID reports whether s is an Arweave transaction id (43 characters of base64url) or
// an ArNS name.
func isArweaveID(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !isAlnum(c) && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// decodeDataURI decodes the part after "data:" of an RFC 2397 URI whose media type is JSON,
// plain text or absent. The data is base64 (standard or URL alphabet, padded or not) or
// percent-encoded; on-chain URIs often hold raw, unescaped JSON, which is taken as is when
// it does not percent-decode into a JSON object. The result is at most maxBytes long.
func decodeDataURI(s string, maxBytes int64) ([]byte, error) {
	header, data, ok := strings.Cut(s, ",")
	if !ok {
		return nil, failure(reasonDataEncoding)
	}
	params := strings.Split(header, ";")
	isBase64 := false
	for _, p := range params[1:] { // RFC 2397 puts ";base64" last; some put it before a charset
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			isBase64 = true
		}
	}
	switch mt := strings.ToLower(strings.TrimSpace(params[0])); mt {
	case "", "application/json", "text/json", "text/plain":
	default:
		return nil, failure(reasonDataMediaType)
	}
	if isBase64 {
		if int64(len(data)) > 2*maxBytes+1024 { // room for white space; checked again below
			return nil, failure(reasonTooLarge)
		}
		doc, ok := decodeBase64(data)
		if !ok {
			return nil, failure(reasonDataEncoding)
		}
		if int64(len(doc)) > maxBytes {
			return nil, failure(reasonTooLarge)
		}
		return doc, nil
	}
	if int64(len(data)) > 3*maxBytes {
		return nil, failure(reasonTooLarge)
	}
	doc := []byte(percentDecode(data))
	if int64(len(doc)) > maxBytes {
		return nil, failure(reasonTooLarge)
	}
	return doc, nil
}

// percentDecode decodes the percent-encoded data of a data: URI, leniently: data that does
// not decode (a raw "100%"), or that is a JSON object only as it stands (a raw "%22" inside
// a string), is taken as it is.
func percentDecode(data string) string {
	if !strings.Contains(data, "%") {
		return data
	}
	dec, err := url.PathUnescape(data)
	if err != nil {
		return data
	}
	if _, err := jsonObject([]byte(dec)); err != nil {
		if _, rawErr := jsonObject([]byte(data)); rawErr == nil {
			return data
		}
	}
	return dec
}

// decodeBase64 decodes s in the standard or URL alphabet, padded or not, ignoring white
// space and percent-encoded padding.
func decodeBase64(s string) ([]byte, bool) {
	if strings.Contains(s, "%") {
		if u, err := url.PathUnescape(s); err == nil {
			s = u
		}
	}
	s = strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\n', '\r':
			return -1
		}
		return r
	}, s)
	s = strings.TrimRight(s, "=")
	enc := base64.RawStdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.RawURLEncoding
	}
	b, err := enc.DecodeString(s)
	return b, err == nil
}
