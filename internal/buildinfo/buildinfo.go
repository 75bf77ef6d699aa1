// Package buildinfo says which build of web3gate is running: its version, the VCS revision
// it was built from, whether that checkout had uncommitted changes, and the Go release that
// compiled it. `web3gate version`, the log line at start, web3_clientVersion and the metric
// web3gate_build_info show it.
//
// The values come from the binary itself (runtime/debug.ReadBuildInfo):
//   - built as a module at a tag (go install github.com/web3gate/web3gate@v1.2.3): the
//     module's version;
//   - built in a git clone (go build): the vcs.revision and vcs.modified the go command
//     stamps, and as version the pseudo-version it derives from them (v1.2.3 at a tag);
//     the go command stamps nothing with -buildvcs=false, nor in a git worktree;
//   - make build and make release set them with the linker, which takes precedence over
//     what the binary records:
//     -ldflags "-X github.com/web3gate/web3gate/internal/buildinfo.version=v1.2.3
//     -X github.com/web3gate/web3gate/internal/buildinfo.revision=<commit>
//     -X github.com/web3gate/web3gate/internal/buildinfo.modified=true|false"
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Set by the linker for release builds (see the package comment); empty otherwise.
var (
	version  string
	revision string
	modified string // "true": the checkout had uncommitted changes; read only with revision
)

// Devel is the version of a build that is neither a tagged module nor a release build.
const Devel = "devel"

// Info describes one build.
type Info struct {
	// Version is the release (v1.2.3), the module version of a tagged module build
	// (v1.2.3, or a pseudo-version), or Devel.
	Version string
	// Revision is the VCS commit the binary was built from; "" when unknown (a build outside
	// a checkout, or with -buildvcs=false).
	Revision string
	// Modified: the checkout had uncommitted changes at build time.
	Modified bool
	// GoVersion is the Go release that compiled the binary (go1.26.8).
	GoVersion string
}

// Read returns this binary's build information.
func Read() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuildInfo(bi, version, revision, modified == "true")
}

// Version is Read().Version: what the server logs at start and answers in
// web3_clientVersion.
func Version() string { return Read().Version }

// fromBuildInfo composes an Info from what the binary records (bi, nil when it records
// nothing) and the linker-set values (ldVersion, ldRevision with ldModified), which win
// when set.
func fromBuildInfo(bi *debug.BuildInfo, ldVersion, ldRevision string, ldModified bool) Info {
	info := Info{Version: Devel, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		// "(devel)" is what the go command records for the main module of a build in its
		// own checkout; a module built at a tag or commit records that version.
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Revision = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if ldVersion != "" {
		info.Version = ldVersion
	}
	if ldRevision != "" {
		info.Revision = ldRevision
		info.Modified = ldModified
	}
	return info
}

// String is the one-line form `web3gate version` prints:
// "v1.2.3 (revision 0123456789ab, go1.26.8)", with ", modified" after a revision built
// with uncommitted changes.
func (i Info) String() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (")
	if i.Revision != "" {
		b.WriteString("revision ")
		b.WriteString(ShortRevision(i.Revision))
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(", ")
	}
	b.WriteString(i.GoVersion)
	b.WriteString(")")
	return b.String()
}

// ShortRevision is the first 12 characters of a commit hash (the whole of a shorter one).
func ShortRevision(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}
