package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := func(rev, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	checkout := func(version, modified string) *debug.BuildInfo {
		return &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: version}, Settings: vcs("0123456789abcdef", modified)}
	}
	tests := []struct {
		name         string
		bi           *debug.BuildInfo
		ldVer, ldRev string
		ldModified   bool
		want         Info
	}{
		{"nothing recorded", nil, "", "", false, Info{Version: Devel, GoVersion: runtime.Version()}},
		{"no vcs stamp", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "", false,
			Info{Version: Devel, GoVersion: "go1.26.8"}},
		{"checkout build", checkout("v0.0.0-20260101000000-0123456789ab", "false"), "", "", false,
			Info{Version: "v0.0.0-20260101000000-0123456789ab", Revision: "0123456789abcdef", GoVersion: "go1.26.8"}},
		{"checkout build with changes", checkout("(devel)", "true"), "", "", false,
			Info{Version: Devel, Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26.8"}},
		{"tagged module", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}}, "", "", false,
			Info{Version: "v1.2.3", GoVersion: "go1.26.8"}},
		{"linker values", checkout("(devel)", "true"), "v2.0.0", "fedcba9876543210", false,
			Info{Version: "v2.0.0", Revision: "fedcba9876543210", GoVersion: "go1.26.8"}},
		{"linker values with changes", checkout("(devel)", "false"), "v2.0.0", "fedcba9876543210", true,
			Info{Version: "v2.0.0", Revision: "fedcba9876543210", Modified: true, GoVersion: "go1.26.8"}},
		{"linker version only", checkout("(devel)", "true"), "v2.0.0", "", false,
			Info{Version: "v2.0.0", Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26.8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fromBuildInfo(tt.bi, tt.ldVer, tt.ldRev, tt.ldModified); got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		info Info
		want string
	}{
		{Info{Version: "v1.2.3", Revision: "0123456789abcdef", GoVersion: "go1.26.8"}, "v1.2.3 (revision 0123456789ab, go1.26.8)"},
		{Info{Version: Devel, Revision: "0123456789abcdef", Modified: true, GoVersion: "go1.26.8"}, "devel (revision 0123456789ab, modified, go1.26.8)"},
		{Info{Version: Devel, GoVersion: "go1.26.8"}, "devel (go1.26.8)"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.info.String(); got != tt.want {
				t.Fatalf("got %q", got)
			}
		})
	}
}

// TestBuilt builds testdata/printinfo with the go command in a git repository of its own
// (a copy of this package, committed) and reads what the binary says about itself: the
// stamps of a build in a clone, at a commit and at a tag, and the linker's values.
func TestBuilt(t *testing.T) {
	repo := t.TempDir()
	copyFile(t, "../../go.mod", filepath.Join(repo, "go.mod"))
	for _, f := range []string{"buildinfo.go", "testdata/printinfo/main.go"} {
		copyFile(t, f, filepath.Join(repo, "internal/buildinfo", f))
	}
	git := func(args ...string) string {
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}, args...)...)
		cmd.Dir = repo
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	build := func(t *testing.T, ldflags string) Info {
		bin := filepath.Join(t.TempDir(), "printinfo")
		cmd := exec.Command("go", "build", "-ldflags", ldflags, "-o", bin, "./internal/buildinfo/testdata/printinfo")
		cmd.Dir = repo
		// -buildvcs=true: stamp, or fail saying why not (the environment may turn it off).
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=true -mod=mod", "GOPROXY=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("printinfo: %v", err)
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(lines) != 4 {
			t.Fatalf("printinfo printed %q", out)
		}
		modified, err := strconv.ParseBool(lines[2])
		if err != nil {
			t.Fatalf("printinfo printed %q", out)
		}
		return Info{Version: lines[0], Revision: lines[1], Modified: modified, GoVersion: lines[3]}
	}
	check := func(t *testing.T, got, want Info) {
		t.Helper()
		if got != want {
			t.Fatalf("got %+v, want %+v", got, want)
		}
	}
	git("init", "-q")
	git("add", ".")
	git("commit", "-q", "-m", "first")
	head := git("rev-parse", "HEAD")
	goVersion := runtime.Version()

	t.Run("commit", func(t *testing.T) {
		got := build(t, "")
		// The go command derives a pseudo-version from the commit: v0.0.0-<time>-<hash>.
		if !strings.HasPrefix(got.Version, "v0.0.0-") || !strings.HasSuffix(got.Version, "-"+head[:12]) {
			t.Fatalf("version %q: not a pseudo-version of %s", got.Version, head)
		}
		check(t, got, Info{Version: got.Version, Revision: head, GoVersion: goVersion})
	})
	t.Run("linker values", func(t *testing.T) {
		got := build(t, "-X github.com/web3gate/web3gate/internal/buildinfo.version=v9.8.7 "+
			"-X github.com/web3gate/web3gate/internal/buildinfo.revision=abc123 "+
			"-X github.com/web3gate/web3gate/internal/buildinfo.modified=true")
		check(t, got, Info{Version: "v9.8.7", Revision: "abc123", Modified: true, GoVersion: goVersion})
	})
	// A new commit for the tag: the go command keeps what it found of a revision.
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("web3gate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git("add", "README")
	git("commit", "-q", "-m", "second")
	git("tag", "v1.2.3")
	tagged := git("rev-parse", "HEAD")
	t.Run("tag", func(t *testing.T) {
		check(t, build(t, ""), Info{Version: "v1.2.3", Revision: tagged, GoVersion: goVersion})
	})
	t.Run("uncommitted changes", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(repo, "README"), []byte("changed\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		check(t, build(t, ""), Info{Version: "v1.2.3+dirty", Revision: tagged, Modified: true, GoVersion: goVersion})
	})
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
