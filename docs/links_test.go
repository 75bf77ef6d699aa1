package docs

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/web3gate/web3gate/config"
)

// root is the repository's top directory, seen from this package's directory (where go test
// runs its tests).
const root = ".."

// maxReadmeLines bounds README.md: it is the front door, the reference lives under docs/.
const maxReadmeLines = 260

// markdownFiles lists every *.md file of the repository, outside .git and node_modules.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no markdown files found")
	}
	return files
}

var (
	fence      = regexp.MustCompile("^\\s*(```|~~~)")
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	heading    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
)

// parsed is what the link check needs of one markdown file.
type parsed struct {
	links   []link
	anchors map[string]bool
}

type link struct {
	line   int
	target string
}

// parse reads a markdown file's links and the anchors its headings make, leaving out what
// is inside fenced code blocks and code spans.
func parse(t *testing.T, path string) parsed {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	p := parsed{anchors: map[string]bool{}}
	seen := map[string]int{}
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if fence.MatchString(line) {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			p.anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			slug := slugify(m[2])
			if k := seen[slug]; k > 0 {
				p.anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				p.anchors[slug] = true
			}
			seen[slug]++
		}
		text := codeSpan.ReplaceAllString(line, "")
		for _, m := range inlineLink.FindAllStringSubmatch(text, -1) {
			p.links = append(p.links, link{n, m[1]})
		}
		if m := refLink.FindStringSubmatch(text); m != nil {
			p.links = append(p.links, link{n, m[1]})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return p
}

// slugify is GitHub's anchor of a heading: the text without markup, lower case, every
// character but letters, digits, spaces, '-' and '_' dropped, spaces made '-'.
func slugify(h string) string {
	h = inlineLink.ReplaceAllStringFunc(h, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.LastIndex(s, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRelativeLinks: every relative link of every markdown file names a file or directory of
// the repository, and every anchor a heading of the page it points to. Links outside the
// repository are refused: a reader of a clone has nothing there.
func TestRelativeLinks(t *testing.T) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	files := markdownFiles(t)
	pages := map[string]parsed{}
	for _, f := range files {
		pages[filepath.Clean(f)] = parse(t, f)
	}
	checked := 0
	for _, f := range files {
		for _, l := range pages[filepath.Clean(f)].links {
			target := l.target
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			where := fmt.Sprintf("%s:%d: %s", f, l.line, target)
			path, anchor, _ := strings.Cut(target, "#")
			dest := filepath.Clean(f)
			if path != "" {
				if filepath.IsAbs(path) {
					t.Errorf("%s: an absolute path; link relative to the page", where)
					continue
				}
				dest = filepath.Join(filepath.Dir(f), filepath.FromSlash(path))
				abs, err := filepath.Abs(dest)
				if err != nil {
					t.Fatal(err)
				}
				if abs != absRoot && !strings.HasPrefix(abs, absRoot+string(filepath.Separator)) {
					t.Errorf("%s: points outside the repository", where)
					continue
				}
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: no such file", where)
					continue
				}
			}
			checked++
			if anchor == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			page, ok := pages[dest]
			if !ok {
				page = parse(t, dest)
			}
			if !page.anchors[anchor] {
				t.Errorf("%s: %s has no heading with the anchor #%s", where, dest, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative link found: the parser is broken")
	}
}

// TestSlugify holds the anchor rule to GitHub's on the kinds of headings the docs have.
func TestSlugify(t *testing.T) {
	for h, want := range map[string]string{
		"eth_getLogs over large ranges":           "eth_getlogs-over-large-ranges",
		"The store: SQLite or PostgreSQL":         "the-store-sqlite-or-postgresql",
		"Proxy: (a)–(e)":                          "proxy-ae",
		"`web3gate config check`":                 "web3gate-config-check",
		"Signing: (f) `eth_signTransaction`, (g)": "signing-f-eth_signtransaction-g",
		"See [Leases](leases.md) first":           "see-leases-first",
	} {
		if got := slugify(h); got != want {
			t.Errorf("slugify(%q) = %q, want %q", h, got, want)
		}
	}
}

// TestReadmeIsShort: README.md stays a front door.
func TestReadmeIsShort(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte("\n")); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: move reference text into a page under docs/", n, maxReadmeLines)
	}
}

// TestMinimalExampleLoads: examples/minimal.yaml, which the README offers as the way onto a
// real provider, passes `web3gate config check` once its environment variables are set, and
// names them when they are not.
func TestMinimalExampleLoads(t *testing.T) {
	path := filepath.Join(root, "examples", "minimal.yaml")
	t.Setenv("ETH_RPC_URL", "https://eth-mainnet.example/v2/key")
	t.Setenv("WEB3GATE_TOKEN_SHA256", strings.Repeat("ab", 32))
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if cfg.Devchain.Enabled || cfg.Upstreams.Mainnet != 1 || len(cfg.Upstreams.Chains) != 1 {
		t.Errorf("%s: want mainnet 1 on one provider and no dev chain, got mainnet %d, %d chains, devchain %v",
			path, cfg.Upstreams.Mainnet, len(cfg.Upstreams.Chains), cfg.Devchain.Enabled)
	}
	if got := cfg.Upstreams.Chains[0].URLs; len(got) != 1 || got[0] != "https://eth-mainnet.example/v2/key" {
		t.Errorf("%s: the node URL is %q, want the one from ETH_RPC_URL", path, got)
	}

	os.Unsetenv("ETH_RPC_URL")
	if _, err := config.Load(path); err == nil || !strings.Contains(err.Error(), "ETH_RPC_URL is not set") {
		t.Errorf("%s without ETH_RPC_URL: got %v, want an error naming the variable", path, err)
	}
}
