// Package version says which build of svc is running: the version stamped by the Makefile, else what
// the Go toolchain recorded of the source it built from.
package version

import (
	"runtime/debug"
	"sync"
)

// stamped is set at link time by the Makefile (`-ldflags "-X github.com/svcdev/svc/internal/version.stamped=…"`)
// from `git describe --always --dirty`; empty in a plain `go build`.
var stamped string

var once = sync.OnceValue(func() string {
	info, _ := debug.ReadBuildInfo()
	return resolve(stamped, info)
})

// String is the version of this binary: the stamped one, else the module version of a
// `go install …@vX`, else the VCS revision Go recorded (12 characters, "-dirty" when the tree had
// changes), else "devel".
func String() string { return once() }

// resolve is String's rule, apart from the process so that tests can give it any build info.
func resolve(stamped string, info *debug.BuildInfo) string {
	if stamped != "" {
		return stamped
	}
	if info == nil {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
