package translate

import (
	"github.com/svcdev/svc/internal/bytememo"
	"github.com/svcdev/svc/internal/conv"
)

// An agent sends the same tools on every request of a session (Claude Code's 5 KB of them, Codex's),
// and their translation was a third of a translated request's work: a translation keeps the tools it
// read lately (a bytememo.Memo of toolsRead) and takes them from there when the request's tools are byte for
// byte the same. An agent also sends its whole conversation again on every turn, the last turn's
// items and a few new ones: a Responses translation keeps what the input items of its last requests
// made (inputmemo.go). A request whose tools or items are refused is translated again each time
// (errors are not kept).

// toolsRead is what reading a request's tools gives: the tools offered to the chat model, written as
// the chat request's member (json.Marshal's bytes, appendTools), what the translation notes (the size
// the prompt estimate counts, the fields named ignored), and what the surface keeps of the names.
type toolsRead[N any] struct {
	tools   []conv.Tool
	encoded []byte
	chars   int
	ignored []string
	names   N
}

// The tools of the last requests: at most memoTools of them, memoToolBytes in all.
const (
	memoTools     = 64
	memoToolBytes = 8 << 20
)

func newToolMemo[N any]() *bytememo.Memo[*toolsRead[N]] {
	return bytememo.New[*toolsRead[N]](memoTools, memoToolBytes)
}

// use puts the kept tools into the request being translated.
func (r *toolsRead[N]) use(out *chatRequest, chars *int, info *RequestInfo) {
	out.Tools = r.tools[:len(r.tools):len(r.tools)]
	*chars += r.chars
	for _, n := range r.ignored {
		info.ignore(n)
	}
}
