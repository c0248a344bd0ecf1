package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository root, the parent of this folder.
var root = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

// goFiles returns every Go file of the repository (not node_modules or hidden folders).
func goFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var (
	mdName = regexp.MustCompile(`[A-Za-z0-9_./-]*[A-Za-z0-9_-]\.md\b`)
	// section is a pointer into a document: docs/API.md, "Errors".
	section = regexp.MustCompile(`([A-Za-z0-9_./-]+\.md),\s+"([^"]+)"`)
	// outside names the documents that live outside the repository (the steering folder's).
	outside = regexp.MustCompile(`\b(SPEC|DESIGN|STYLE|TOOLCHAIN)\b`)
)

// resolve finds the document a comment names: relative to the repository root, to the commenting
// file's folder, or in docs/.
func resolve(name, fromDir string) (string, bool) {
	for _, p := range []string{filepath.Join(root, name), filepath.Join(fromDir, name), filepath.Join(root, "docs", name)} {
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, true
		}
	}
	return "", false
}

func headings(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "#") {
			out[strings.TrimSpace(strings.TrimLeft(line, "#"))] = true
		}
	}
	return out
}

// TestCommentsPointAtDocumentsInTheRepository fails when a Go comment names a .md document that is
// not in the repository, a section that the document does not have, or one of the documents kept
// outside it.
func TestCommentsPointAtDocumentsInTheRepository(t *testing.T) {
	fset := token.NewFileSet()
	for _, path := range goFiles(t) {
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, path)
		for _, cg := range f.Comments {
			text := strings.Join(strings.Fields(cg.Text()), " ")
			pos := fset.Position(cg.Pos())
			for _, name := range mdName.FindAllString(text, -1) {
				if _, ok := resolve(name, filepath.Dir(path)); !ok {
					t.Errorf("%s:%d: the comment names %s, which is not in the repository", rel, pos.Line, name)
				}
			}
			for _, m := range section.FindAllStringSubmatch(text, -1) {
				doc, ok := resolve(m[1], filepath.Dir(path))
				if ok && !headings(t, doc)[m[2]] {
					t.Errorf("%s:%d: the comment points at section %q of %s, which has no such heading", rel, pos.Line, m[2], m[1])
				}
			}
			if m := outside.FindString(text); m != "" {
				t.Errorf("%s:%d: the comment refers to %s, a document outside the repository; point at docs/ instead", rel, pos.Line, m)
			}
		}
	}
}

// TestRuleTableNamesCodeThatExists checks the "Where each rule lives" table of ARCHITECTURE.md: every
// file it names exists, and every identifier named after a file is declared in it (after a folder, in
// one of its Go files; after another kind of file, it appears in its text).
func TestRuleTableNamesCodeThatExists(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(root, "docs", "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Where each rule lives")
	if start < 0 {
		t.Fatal(`ARCHITECTURE.md has no "Where each rule lives" section`)
	}
	body := doc[start+3:]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	ticked := regexp.MustCompile("`([^`]+)`")
	rows := 0
	for _, line := range strings.Split(body, "\n") {
		cells := strings.Split(strings.Trim(line, " |"), "|")
		if len(cells) < 3 || strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || strings.TrimSpace(cells[0]) == "rule" {
			continue
		}
		rows++
		where := cells[len(cells)-1]
		var current string // the file or folder the next identifiers belong to
		for _, m := range ticked.FindAllStringSubmatch(where, -1) {
			tok := m[1]
			if strings.Contains(tok, "/") {
				if _, err := os.Stat(filepath.Join(root, tok)); err != nil {
					t.Errorf("rule %q: %s does not exist", strings.TrimSpace(cells[0]), tok)
					current = ""
					continue
				}
				current = tok
				continue
			}
			if current == "" {
				t.Errorf("rule %q: %s is not preceded by the file that holds it", strings.TrimSpace(cells[0]), tok)
				continue
			}
			if !declares(t, filepath.Join(root, current), tok) {
				t.Errorf("rule %q: %s does not declare %s", strings.TrimSpace(cells[0]), current, tok)
			}
		}
	}
	if rows < 30 {
		t.Fatalf("the rule table has %d rows; did its layout change?", rows)
	}
}

// declares reports whether the file (or the Go files of the folder) at path declares name: a function,
// a method (Type.Method), a type, a constant, a variable or a struct field (Type.Field). Other files
// must merely contain name.
func declares(t *testing.T, path, name string) bool {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	var files []string
	switch {
	case fi.IsDir():
		files, _ = filepath.Glob(filepath.Join(path, "*.go"))
	case strings.HasSuffix(path, ".go"):
		files = []string{path}
	default:
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), name)
	}
	typ, member, qualified := strings.Cut(name, ".")
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		ast.Inspect(f, func(n ast.Node) bool {
			switch d := n.(type) {
			case *ast.FuncDecl:
				if !qualified && d.Name.Name == name {
					found = true
				}
				if qualified && d.Recv != nil && d.Name.Name == member && receiverType(d.Recv.List[0].Type) == typ {
					found = true
				}
			case *ast.TypeSpec:
				if !qualified && d.Name.Name == name {
					found = true
				}
				if st, ok := d.Type.(*ast.StructType); ok && qualified && d.Name.Name == typ {
					for _, field := range st.Fields.List {
						for _, id := range field.Names {
							if id.Name == member {
								found = true
							}
						}
					}
				}
			case *ast.ValueSpec:
				for _, id := range d.Names {
					if !qualified && id.Name == name {
						found = true
					}
				}
			}
			return !found
		})
		if found {
			return true
		}
	}
	return false
}

func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	case *ast.IndexExpr:
		return receiverType(x.X)
	}
	return ""
}
