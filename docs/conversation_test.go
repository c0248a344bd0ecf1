package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// conversationReaders are the packages that may read a request's "messages" array (ARCHITECTURE.md, "One
// reading of a conversation"): the reader itself, the translations of the other surfaces into it, and,
// apart from svc's requests, the fine-tuning line's own format (dataset) and the fake upstream, which plays
// vLLM's side of the wire.
var conversationReaders = map[string]string{
	"internal/conv":         "the one reading of a conversation",
	"internal/translate":    "Messages' and Responses' requests read into internal/conv's conversation",
	"internal/dataset":      "the fine-tuning lines' own messages (written and validated), not a request's",
	"internal/mockupstream": "the fake upstream (and its vLLM replica engine): the model's side of the wire",
}

// readsMessages matches Go that reads a "messages" member: a struct field decoded from it, or a map's
// member taken by that name.
var readsMessages = regexp.MustCompile(`json:"messages[",]|\["messages"\]`)

// TestOnlyTheConversationReaderReadsMessages fails when a package other than the conversation reader
// (and the few conversationReaders name) reads a request's messages array: a second reading of a
// conversation is how the edge and the export came to disagree.
func TestOnlyTheConversationReaderReadsMessages(t *testing.T) {
	skip := func(dir string) bool { _, ok := conversationReaders[dir]; return ok }
	eachGoLine(t, skip, func(rel string, n int, line string) {
		if readsMessages.MatchString(line) {
			t.Errorf("%s:%d reads a messages array: read the conversation through internal/conv instead (docs/ARCHITECTURE.md, \"One reading of a conversation\")\n\t%s", rel, n, strings.TrimSpace(line))
		}
	})
}

// eachGoLine calls line for each line of the repository's Go files, tests apart, outside the folders
// (relative, slash-separated) that skip names, with the file's relative path and the line's number.
func eachGoLine(t *testing.T, skip func(dir string) bool, line func(rel string, n int, text string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "node_modules" || strings.HasPrefix(d.Name(), ".") && rel != "." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || skip(filepath.ToSlash(filepath.Dir(rel))) {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, text := range strings.Split(string(b), "\n") {
			line(rel, i+1, text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
