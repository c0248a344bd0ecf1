package docs

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
)

// listedPackage is what `go list -deps -json` says of a package.
type listedPackage struct {
	ImportPath string
	Standard   bool
	DepOnly    bool     // a dependency of the module's packages, not one of them
	Imports    []string // imports of its non-test files
	Deps       []string // everything it links, transitively
}

var (
	listOnce sync.Once
	listed   map[string]*listedPackage
	listErr  error
)

// goList lists the module's packages and everything they link, once per test binary.
func goList(t *testing.T) map[string]*listedPackage {
	t.Helper()
	listOnce.Do(func() {
		cmd := exec.Command("go", "list", "-deps", "-json", "./...")
		cmd.Dir = root
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			listErr = errors.New("go list: " + err.Error() + ": " + stderr.String())
			return
		}
		listed = map[string]*listedPackage{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p listedPackage
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				listErr = err
				return
			}
			listed[p.ImportPath] = &p
		}
	})
	if listErr != nil {
		t.Fatal(listErr)
	}
	return listed
}

// modulePath reads the module's path from go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(root + "/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^module\s+(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("go.mod names no module")
	}
	return string(m[1])
}

// packageTable reads the "Packages" table of ARCHITECTURE.md: for each package (a path relative to
// the module's root), the imports it may have (module packages relative, third-party ones in full).
func packageTable(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(root + "/docs/ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "\n## Packages\n")
	if start < 0 {
		t.Fatal(`ARCHITECTURE.md has no "Packages" section`)
	}
	body := doc[start+1:]
	if end := strings.Index(body[3:], "\n## "); end >= 0 {
		body = body[:end+3]
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	table := map[string][]string{}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, " |"), " | ")
		if len(cells) != 3 {
			t.Fatalf("a row of the package table has %d cells, not 3: %s", len(cells), line)
		}
		pkg := ticked.FindAllStringSubmatch(cells[0], -1)
		if len(pkg) != 1 {
			t.Fatalf("the first cell of a package row names %d packages, not 1: %s", len(pkg), line)
		}
		if _, dup := table[pkg[0][1]]; dup {
			t.Errorf("the package table has two rows for %s", pkg[0][1])
		}
		allowed := []string{}
		for _, m := range ticked.FindAllStringSubmatch(cells[2], -1) {
			allowed = append(allowed, m[1])
		}
		table[pkg[0][1]] = allowed
	}
	if len(table) < 20 {
		t.Fatalf("the package table has %d rows; did its layout change?", len(table))
	}
	return table
}

// thirdParty reports whether an import path is outside the module and the standard library: its first
// element has a dot.
func thirdParty(path string) bool {
	first, _, _ := strings.Cut(path, "/")
	return strings.Contains(first, ".")
}

// TestPackageTableIsTheImportGraph compares ARCHITECTURE.md's package table with the imports of the
// module's packages (their non-test files), both ways: every package has a row and every row a
// package; every import of the module or of a third party is listed in its package's row, and every
// entry of a row is imported.
func TestPackageTableIsTheImportGraph(t *testing.T) {
	pkgs, mod, table := goList(t), modulePath(t), packageTable(t)
	rel := func(path string) (string, bool) {
		if path == mod {
			return ".", true
		}
		r, ok := strings.CutPrefix(path, mod+"/")
		return r, ok
	}
	var ours []string
	for path, p := range pkgs {
		if r, ok := rel(path); ok && !p.DepOnly {
			ours = append(ours, r)
		}
	}
	sort.Strings(ours)
	if len(ours) < 20 {
		t.Fatalf("go list found %d packages of %s; is the module root %s?", len(ours), mod, root)
	}
	for _, name := range ours {
		if _, ok := table[name]; !ok {
			t.Errorf("package %s has no row in the package table of docs/ARCHITECTURE.md", name)
		}
	}
	for name := range table {
		if !slices.Contains(ours, name) {
			t.Errorf("the package table has a row for %s, which is not a package of the module", name)
		}
	}
	for _, name := range ours {
		allowed, ok := table[name]
		if !ok {
			continue
		}
		used := map[string]bool{}
		for _, imp := range pkgs[mod+"/"+name].Imports {
			if r, ok := rel(imp); ok {
				if slices.Contains(allowed, r) {
					used[r] = true
				} else {
					t.Errorf("%s imports %s, which its row of the package table does not allow", name, r)
				}
				continue
			}
			if p := pkgs[imp]; (p != nil && p.Standard) || !thirdParty(imp) {
				continue
			}
			i := slices.IndexFunc(allowed, func(a string) bool { return thirdParty(a) && (imp == a || strings.HasPrefix(imp, a+"/")) })
			if i < 0 {
				t.Errorf("%s imports %s, which its row of the package table does not allow", name, imp)
				continue
			}
			used[allowed[i]] = true
		}
		for _, a := range allowed {
			if !used[a] {
				t.Errorf("the row of %s allows %s, which it does not import: remove it from the package table", name, a)
			}
		}
	}
}

// dataPlane are the packages an svc edge process serves with (docs/ARCHITECTURE.md, "The data plane").
var dataPlane = []string{"handlers/edge", "internal/inference", "internal/edgesync", "internal/apierr", "internal/edgemodel", "internal/edgeproc", "internal/listen"}

// TestDataPlaneLinksNoDatabase keeps the data plane free of every database: it links no package of
// db, no internal/core (the rules over the store) or internal/recorder (the run writer), and no
// database driver. Redis is the one store it may reach, and only through internal/ratelimit (shared
// limits, svc edge --redis): no other package it links imports go-redis.
func TestDataPlaneLinksNoDatabase(t *testing.T) {
	pkgs, mod := goList(t), modulePath(t)
	forbidden := []string{mod + "/db", mod + "/internal/core", mod + "/internal/recorder",
		"github.com/jackc/pgx", "modernc.org/sqlite", "github.com/lib/pq", "github.com/mattn/go-sqlite3"}
	for _, name := range dataPlane {
		p := pkgs[mod+"/"+name]
		if p == nil {
			t.Fatalf("go list did not list %s", name)
		}
		for _, dep := range append([]string{p.ImportPath}, p.Deps...) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s links %s: the data plane reads internal/edgemodel's types, never the database's", name, dep)
				}
			}
			d := pkgs[dep]
			if d == nil || dep == mod+"/internal/ratelimit" || strings.HasPrefix(dep, "github.com/redis/") {
				continue
			}
			for _, imp := range d.Imports {
				if strings.HasPrefix(imp, "github.com/redis/") {
					t.Errorf("%s links %s, which imports %s: Redis only through internal/ratelimit", name, dep, imp)
				}
			}
		}
	}
}
