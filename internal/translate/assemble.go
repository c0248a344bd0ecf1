package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// The block assembler turns chat completion chunks into a sequence of blocks (reasoning, text, tool
// calls) that a surface renders as its own events (Stream for Messages, ResponsesStream for
// Responses), one block open at a time, which is how both surfaces stream and how their clients
// (the SDKs' stream helpers, Claude Code, Codex) are written:
//
//   - Reasoning, text and tool calls open blocks in the order they first appear; content for the
//     open block is sent at once, one delta per upstream delta.
//   - A block closes when content for a later block arrives and the open block is complete: text and
//     reasoning are complete at once; a tool call when its arguments so far form a valid JSON value.
//     So calls that follow each other (what vLLM and OpenAI send) stream live.
//   - When calls interleave (a later call starts while the open call's arguments are still
//     incomplete), the later call's content is buffered and sent as one delta when its block opens,
//     after the open call completes or the stream finishes.
//   - A tool block opens only once its name is known.
//   - A delta carrying a new id for an index already in use starts a new call (some servers reuse
//     index 0 for every call).
//
// Only choice 0 is assembled.

type blockKind uint8

const (
	kindText blockKind = iota
	kindThinking
	kindTool
)

type streamBlock struct {
	kind      blockKind
	index     int // the surface's index (Anthropic's content index, Responses' output_index), once started
	started   bool
	closed    bool
	content   strings.Builder // text, reasoning, or a tool call's arguments
	sent      int             // bytes of content already sent in deltas
	id, name  string
	surfaceID string // the surface's id of the block (a Responses output item's), once it needs one
}

// sink renders the assembler's block events as a surface's events.
type sink interface {
	openBlock(b *streamBlock)
	deltaBlock(b *streamBlock, part string)
	// closeBlock ends b; cut tells that the answer stopped at max_tokens (a tool call's arguments may
	// be incomplete). An error means b cannot be given to the client.
	closeBlock(b *streamBlock, cut bool) error
}

type assembler struct {
	sink sink
	// reasoning keeps the upstream's reasoning as blocks; without it reasoning is only counted.
	reasoning bool

	blocks []*streamBlock
	live   *streamBlock         // the open block, nil between blocks
	calls  map[int]*streamBlock // the latest tool call of each upstream index
	opened int                  // blocks started so far: the next block's index

	finish   string
	matched  *string
	upstream *Usage // the upstream's latest usage, nil until it sends one
	counted  int    // deltas that carried content, for usage without upstream usage
}

// add assembles one choice of a chunk; choices other than 0 are left out.
func (a *assembler) add(ch *StreamChoice) error {
	if ch.Index != 0 {
		return nil
	}
	if ch.Reasoning != "" {
		a.counted++
		if a.reasoning {
			if err := a.append(a.sequential(kindThinking), ch.Reasoning); err != nil {
				return err
			}
		}
	}
	if ch.Content != "" {
		a.counted++
		if err := a.append(a.sequential(kindText), ch.Content); err != nil {
			return err
		}
	}
	for _, tc := range ch.ToolCalls {
		b := a.calls[tc.Index]
		if b == nil || (tc.ID != "" && b.id != "" && tc.ID != b.id) {
			b = &streamBlock{kind: kindTool}
			a.calls[tc.Index] = b
			a.blocks = append(a.blocks, b)
			a.counted++
		} else if tc.Arguments != "" {
			a.counted++
		}
		if b.id == "" && !b.started {
			b.id = tc.ID
		}
		if b.name == "" && !b.started {
			b.name = tc.Name
		}
		if b.closed {
			if strings.TrimSpace(tc.Arguments) != "" {
				return fmt.Errorf("%w: the upstream sent more arguments for tool %q after they were complete", ErrInvalidToolArguments, b.name)
			}
			continue
		}
		if err := a.append(b, tc.Arguments); err != nil {
			return err
		}
	}
	if ch.FinishReason != "" {
		a.finish = ch.FinishReason
		a.matched = nil
		if ch.StopReason != "" {
			stop := ch.StopReason
			a.matched = &stop
		}
	}
	return nil
}

// sequential returns the block that new text or reasoning goes to: the last block if it is of that
// kind, else a new one.
func (a *assembler) sequential(kind blockKind) *streamBlock {
	if n := len(a.blocks); n > 0 && a.blocks[n-1].kind == kind {
		return a.blocks[n-1]
	}
	b := &streamBlock{kind: kind}
	a.blocks = append(a.blocks, b)
	return b
}

// append adds content to b and sends what can be sent.
func (a *assembler) append(b *streamBlock, content string) error {
	b.content.WriteString(content)
	return a.pump()
}

// pump opens, feeds and closes blocks as far as the rules allow.
func (a *assembler) pump() error {
	for {
		if a.live == nil {
			b := a.firstOpen()
			if b == nil || (b.kind == kindTool && b.name == "") {
				return nil
			}
			a.open(b)
		}
		a.flush(a.live)
		if a.live == a.blocks[len(a.blocks)-1] || !complete(a.live) {
			return nil
		}
		if err := a.close(a.live, false); err != nil {
			return err
		}
	}
}

// firstOpen returns the first block not closed yet.
func (a *assembler) firstOpen() *streamBlock {
	for _, b := range a.blocks {
		if !b.closed {
			return b
		}
	}
	return nil
}

// complete reports whether no more content is expected for b.
func complete(b *streamBlock) bool {
	if b.kind != kindTool {
		return true
	}
	args := bytes.TrimSpace([]byte(b.content.String()))
	return len(args) > 0 && json.Valid(args)
}

func (a *assembler) open(b *streamBlock) {
	b.started, b.index = true, a.opened
	a.opened++
	a.live = b
	if b.kind == kindTool && b.id == "" {
		b.id = toolUseID()
	}
	a.sink.openBlock(b)
}

// flush sends the content of b not sent yet as one delta.
func (a *assembler) flush(b *streamBlock) {
	all := b.content.String()
	if b.sent == len(all) {
		return
	}
	part := all[b.sent:]
	if b.kind == kindTool && strings.TrimSpace(all[:b.sent]) == "" {
		// Leading whitespace alone is no JSON a client could parse; it is left out.
		part = strings.TrimLeft(part, " \t\r\n")
	}
	b.sent = len(all)
	if part == "" {
		return
	}
	a.sink.deltaBlock(b, part)
}

func (a *assembler) close(b *streamBlock, cut bool) error {
	if err := a.sink.closeBlock(b, cut); err != nil {
		return err
	}
	b.closed = true
	a.live = nil
	return nil
}

// end closes the blocks still open, in order, sending what was buffered. An error means a tool call
// cannot be given to the client (no name, or arguments the surface refuses).
func (a *assembler) end() error {
	cut := a.finish == "length"
	for _, b := range a.blocks {
		if b.closed {
			continue
		}
		if b.kind == kindTool && b.name == "" {
			return errors.New("the upstream called a tool without naming it")
		}
		if !b.started {
			a.open(b)
		}
		a.flush(b)
		if err := a.close(b, cut); err != nil {
			return err
		}
	}
	return nil
}

// tools reports whether the answer called a tool.
func (a *assembler) tools() bool {
	for _, b := range a.blocks {
		if b.kind == kindTool {
			return true
		}
	}
	return false
}

// usage returns the upstream's usage if it sent any; otherwise start input tokens and, as output
// tokens, the number of upstream deltas that carried reasoning or text, started a tool call or
// carried tool arguments.
func (a *assembler) usage(start int) Usage {
	if a.upstream != nil {
		return *a.upstream
	}
	return Usage{InputTokens: start, OutputTokens: a.counted}
}
