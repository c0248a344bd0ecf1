package strictjson

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx"
)

// Walk is the edge's one body walker: a single pass over a request body that judges its JSON as
// json.Valid does, refuses a name written twice in one object as Duplicate does (the same rule, path
// and *Error), and returns the members of a top-level object, their values slices of body (a name
// written twice keeps its last value, as jsonx.Object). Nothing after it checks the body again.
//
// valid is false when body is not JSON (its reader explains why with encoding/json's message, off the
// hot path); dup is the first repeated name of a valid body, whatever comes after it; members is nil
// for a valid body that is not an object (null, an array, a string ...); depth is the deepest nesting
// of objects and arrays (what CheckWith bounds), so that a reader with a bound need not read the body
// again. FuzzWalk holds it to json.Valid, Duplicate, jsonx.Object and depth.
func Walk(body []byte) (members map[string]json.RawMessage, depth int, dup *Error, valid bool) {
	w := bodyWalkers.Get().(*bodyWalker)
	defer w.release()
	w.b, w.i, w.dupDepth, w.deepest = body, 0, maxDupDepth, 0
	w.d.names, w.d.path = w.d.nameBuf[:0], w.d.pathBuf[:0]
	w.i = w.space(0)
	if w.i < len(body) && body[w.i] == '{' {
		w.top = make(map[string]json.RawMessage, 8)
	}
	w.value(0)
	if w.bad || w.space(w.i) != len(body) {
		return nil, 0, nil, false
	}
	if w.d.found {
		return nil, w.deepest, &Error{Field: w.d.render(), Reason: "appears more than once"}, true
	}
	return w.top, w.deepest, nil, true
}

// A Member is a top-level object's member as Members finds it: its name (unescaped) and its value, a
// slice of the body.
type Member struct {
	Name  []byte
	Value []byte
}

// Members is Walk without the duplicate names and without a map: whether body is JSON, and the
// members of a top-level object appended to dst in their order (a name written twice appears twice),
// their names compared nowhere. It is for what svc wrote itself, such as a run's line
// (runs.DecodeRun); what a client sent goes through Walk.
func Members(dst []Member, body []byte) ([]Member, bool) {
	w := bodyWalkers.Get().(*bodyWalker)
	defer w.release()
	w.b, w.i, w.dupDepth = body, 0, 0
	w.i = w.space(0)
	w.list, w.listing = dst, w.i < len(body) && body[w.i] == '{'
	w.value(0)
	if w.bad || w.space(w.i) != len(body) {
		return dst[:0], false
	}
	return w.list, true
}

// Valid reports whether body is JSON, as json.Valid does, in Walk's pass without its names: about
// twice as fast (BenchmarkValid), for what need not be taken apart.
func Valid(body []byte) bool {
	w := bodyWalkers.Get().(*bodyWalker)
	defer w.release()
	w.b, w.i, w.dupDepth = body, 0, 0
	w.i = w.space(0)
	w.value(0)
	return !w.bad && w.space(w.i) == len(body)
}

// maxNesting is encoding/json's bound on nesting: deeper texts are not valid JSON to json.Valid.
const maxNesting = 10000

// bodyWalker walks a body for Walk: the validating scanner, and Duplicate's names and path (d).
type bodyWalker struct {
	d   dupWalker
	b   []byte
	i   int
	bad bool
	top map[string]json.RawMessage
	// list and listing are Members': the top-level members, in order.
	list    []Member
	listing bool
	// dupDepth is the depth down to which names are compared (maxDupDepth; 0 for Valid).
	dupDepth int
	deepest  int // the deepest nesting of objects and arrays met (Walk)
}

var bodyWalkers = sync.Pool{New: func() any { return new(bodyWalker) }}

// release returns the walker to the pool, holding nothing of the body it read.
func (w *bodyWalker) release() {
	clear(w.d.nameBuf[:])
	clear(w.d.pathBuf[:])
	w.d.names, w.d.path, w.d.sets, w.d.found = nil, nil, nil, false
	w.b, w.i, w.bad, w.top = nil, 0, false, nil
	w.list, w.listing = nil, false
	bodyWalkers.Put(w)
}

func (w *bodyWalker) space(i int) int {
	for i < len(w.b) {
		switch w.b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value reads the value at w.i (no space before it); depth is the number of objects and arrays
// around it.
func (w *bodyWalker) value(depth int) {
	if w.i >= len(w.b) {
		w.bad = true
		return
	}
	switch c := w.b[w.i]; c {
	case '{':
		w.object(depth)
	case '[':
		w.array(depth)
	case '"':
		w.str()
	case 't':
		w.literal("true")
	case 'f':
		w.literal("false")
	case 'n':
		w.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			w.number()
			return
		}
		w.bad = true
	}
}

// object reads an object; below maxDupDepth (as Duplicate) its names are compared.
func (w *bodyWalker) object(depth int) {
	if depth+1 > maxNesting {
		w.bad = true
		return
	}
	w.deepest = max(w.deepest, depth+1)
	d := &w.d
	check := depth < w.dupDepth
	base := len(d.names)
	w.i = w.space(w.i + 1)
	if w.i < len(w.b) && w.b[w.i] == '}' {
		w.i++
		return
	}
	for !w.bad {
		if w.i >= len(w.b) || w.b[w.i] != '"' {
			w.bad = true
			return
		}
		ns := w.i
		esc := w.str()
		if w.bad {
			return
		}
		name := w.b[ns+1 : w.i-1]
		if esc && (check || depth == 0 && (w.top != nil || w.listing)) {
			name = unescapedName(w.b[ns:w.i])
		}
		w.i = w.space(w.i)
		if w.i >= len(w.b) || w.b[w.i] != ':' {
			w.bad = true
			return
		}
		w.i = w.space(w.i + 1)
		counted := false
		if check && !d.found {
			counted = true
			d.found = d.seen(name, base)
			d.path = append(d.path, pathStep{name: name})
		}
		vs := w.i
		w.value(depth + 1)
		if w.bad {
			return
		}
		if depth == 0 && w.listing {
			w.list = append(w.list, Member{Name: name, Value: w.b[vs:w.i:w.i]})
		} else if depth == 0 && w.top != nil {
			w.top[string(name)] = w.b[vs:w.i:w.i]
		}
		if counted && !d.found {
			d.path = d.path[:len(d.path)-1]
		}
		if !w.next('}') {
			break
		}
	}
	if check {
		d.names = d.names[:base]
		if d.sets != nil {
			delete(d.sets, base)
		}
	}
}

// unescapedName decodes a name written with escapes (a valid JSON string) as encoding/json does.
func unescapedName(raw []byte) []byte {
	if s, ok := jsonx.Unquote(raw); ok {
		return []byte(s)
	}
	var s string
	json.Unmarshal(raw, &s) // valid, with invalid UTF-8 that encoding/json replaces
	return []byte(s)
}

func (w *bodyWalker) array(depth int) {
	if depth+1 > maxNesting {
		w.bad = true
		return
	}
	w.deepest = max(w.deepest, depth+1)
	d := &w.d
	check := depth < w.dupDepth
	start := w.i
	w.i = w.space(w.i + 1)
	if w.i < len(w.b) && w.b[w.i] == ']' {
		w.i++
		return
	}
	n, outer := 0, w.deepest
	// A top-level member's array, in a walk that compares names (Walk's): the elements that begin it as
	// they began one walked before are not walked again, and it is kept (walkedArrays), with the
	// deepest nesting met in it (w.deepest, from here to its end).
	remember := w.dupDepth == maxDupDepth && depth == 1 && len(w.b)-start >= minWalked
	resumed := false
	if remember {
		w.deepest = depth + 1
		if deepest, count, end := walkedArrays.Longest(w.b[start:], anyArray); end > 0 {
			w.i, n, resumed = start+end, count, true
			w.deepest = max(w.deepest, deepest)
			if !w.next(']') {
				w.deepest = max(outer, w.deepest)
				return
			}
		}
	}
	for ; !w.bad; n++ {
		counted := false
		if check && !d.found {
			counted = true
			d.path = append(d.path, pathStep{index: n, elem: true})
		}
		w.value(depth + 1)
		if w.bad {
			return
		}
		if counted && !d.found {
			d.path = d.path[:len(d.path)-1]
		}
		end := w.i
		if !w.next(']') {
			// Kept as far as its last element when it is valid and holds no name written twice (and
			// none was before it: names are no longer compared once one is found). (One kept whole
			// already returned above.) An array that began with none kept is kept once its head comes
			// again (Offered): most arrays of a chat application's requests are never sent again, and
			// keeping each cost its walk an eighth more.
			if remember && !w.bad && !d.found && end-start >= minWalked && (resumed || walkedArrays.Offered(w.b[start:end])) {
				walkedArrays.Put(w.b[start:end], n+1, 8, w.deepest)
			}
			w.deepest = max(outer, w.deepest)
			return
		}
	}
}

// next reads what follows a member or an element: a comma (true: another one follows) or closer
// (false: the object or array ends); anything else makes the body bad (false).
func (w *bodyWalker) next(closer byte) bool {
	w.i = w.space(w.i)
	if w.i < len(w.b) && w.b[w.i] == ',' {
		w.i = w.space(w.i + 1)
		return true
	}
	if w.i < len(w.b) && w.b[w.i] == closer {
		w.i++
	} else {
		w.bad = true
	}
	return false
}

// str reads a string as encoding/json accepts it (no control characters, known escapes only; invalid
// UTF-8 is accepted, and replaced by its readers) and reports whether it holds an escape.
func (w *bodyWalker) str() (esc bool) {
	b := w.b
	for i := w.i + 1; ; i++ {
		for i+8 <= len(b) && !special8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8 // eight bytes that neither end nor escape the string, and no control character
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			w.i = i + 1
			return esc
		case c < 0x20:
			w.bad = true
			return esc
		case c == '\\':
			esc = true
			if i+1 >= len(b) {
				w.bad = true
				return esc
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if i+5 >= len(b) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) || !isHex(b[i+5]) {
					w.bad = true
					return esc
				}
				i += 5
			default:
				w.bad = true
				return esc
			}
		}
	}
	w.bad = true
	return esc
}

// special8 reports whether one of eight bytes of a string (x, little-endian) is a quote, a backslash or
// a control character: the test of each byte, for a word at a time (the "has less than" and "has
// zero byte" tests of Bit Twiddling Hacks; bytes of 0x80 and over are never flagged).
func special8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	control := (x - ones*0x20) & ^x
	return (control|(quote-ones)&^quote|(backslash-ones)&^backslash)&highs != 0
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func (w *bodyWalker) literal(lit string) {
	if len(w.b)-w.i < len(lit) || string(w.b[w.i:w.i+len(lit)]) != lit {
		w.bad = true
		return
	}
	w.i += len(lit)
}

// number reads a number by JSON's grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (w *bodyWalker) number() {
	b, i := w.b, w.i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i)
	default:
		w.bad = true
		return
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			w.bad = true
			return
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			w.bad = true
			return
		}
		i = j
	}
	w.i = i
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// Duplicate is the one rule on duplicate keys of every body svc reads (the management API's, and the
// edge's chat, Messages and passed-through bodies): a name may appear once in an object, at any depth.
// encoding/json, and most inference servers, keep the last of two silently, so {"max_tokens":5,
// "max_tokens":999999} would mean one thing to whoever reads the first and another to whoever reads the
// last. Names are compared as encoding/json matches them to struct fields: escapes decoded, case
// folded.
//
// It returns an *Error naming the path of the second occurrence ("max_tokens", "messages[0].role"), or
// nil. It reads data in one pass without decoding it and allocates nothing for bodies of ordinary
// shape; it is meant for valid JSON (a body that is not is refused for that by its reader) and stops
// early, without panicking, on anything else.
func Duplicate(data []byte) *Error {
	d := walkers.Get().(*dupWalker)
	defer d.release()
	d.cur = *jsonx.NewCursor(data)
	d.c, d.names, d.path = &d.cur, d.nameBuf[:0], d.pathBuf[:0]
	d.value(0)
	if !d.found {
		return nil
	}
	return &Error{Field: d.render(), Reason: "appears more than once"}
}

// walkers recycles Duplicate's walkers (and their buffers), so that it allocates nothing per body.
var walkers = sync.Pool{New: func() any { return new(dupWalker) }}

// release returns the walker to the pool, holding nothing of the body it read.
func (d *dupWalker) release() {
	clear(d.nameBuf[:])
	clear(d.pathBuf[:])
	d.cur, d.c, d.names, d.path, d.sets, d.found = jsonx.Cursor{}, nil, nil, nil, nil, false
	walkers.Put(d)
}

// dupWalker walks a JSON text for Duplicate.
type dupWalker struct {
	cur   jsonx.Cursor
	c     *jsonx.Cursor
	found bool
	// names holds the names met so far in each object being read, innermost last.
	names   [][]byte
	nameBuf [64][]byte
	// path holds the members and elements around the value being read: a name, or an element's index.
	path    []pathStep
	pathBuf [16]pathStep
	// sets holds the names of the large objects being read, by their base in names.
	sets map[int]map[string]bool
}

type pathStep struct {
	name  []byte
	index int
	elem  bool
}

// smallObject is the number of names below which an object's names are compared one by one; larger
// objects (a schema's properties) use a set, so that no body costs quadratic time.
const smallObject = 32

// maxDupDepth bounds the recursion; bodies deeper than this are refused by their readers anyway.
const maxDupDepth = 512

func (d *dupWalker) value(depth int) {
	c := d.c
	switch c.Kind() {
	case '{':
		if depth >= maxDupDepth {
			c.Raw()
			return
		}
		base := len(d.names)
		c.Object(func(name []byte) {
			if d.found {
				return // the value is skipped
			}
			if d.seen(name, base) {
				d.found = true
				d.path = append(d.path, pathStep{name: name})
				return
			}
			d.path = append(d.path, pathStep{name: name})
			d.value(depth + 1)
			if !d.found {
				d.path = d.path[:len(d.path)-1]
			}
		})
		d.names = d.names[:base]
		if d.sets != nil {
			delete(d.sets, base)
		}
	case '[':
		if depth >= maxDupDepth {
			c.Raw()
			return
		}
		i := 0
		c.Array(func() {
			if d.found {
				return
			}
			d.path = append(d.path, pathStep{index: i, elem: true})
			i++
			d.value(depth + 1)
			if !d.found {
				d.path = d.path[:len(d.path)-1]
			}
		})
	default:
		c.Raw()
	}
}

// seen reports whether name was met before in the object whose names start at base, and notes it.
func (d *dupWalker) seen(name []byte, base int) bool {
	names := d.names[base:]
	set := d.sets[base]
	if set == nil && len(names) < smallObject {
		for _, n := range names {
			if bytes.EqualFold(n, name) {
				return true
			}
		}
		d.names = append(d.names, name)
		return false
	}
	if set == nil {
		set = make(map[string]bool, 2*smallObject)
		for _, n := range names {
			set[fold(n)] = true
		}
		if d.sets == nil {
			d.sets = map[int]map[string]bool{}
		}
		d.sets[base] = set
	}
	k := fold(name)
	if set[k] {
		return true
	}
	set[k] = true
	return false
}

func ascii(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// fold returns a name's key for the set of a large object: what bytes.EqualFold would compare.
func fold(b []byte) string {
	if ascii(b) {
		return string(bytes.ToLower(b))
	}
	return string(bytes.ToLower(bytes.ToUpper(b)))
}

// render writes the path to the duplicate the way the rest of strictjson names fields.
func (d *dupWalker) render() string {
	var b []byte
	for i, s := range d.path {
		if s.elem {
			b = append(append(append(b, '['), strconv.Itoa(s.index)...), ']')
			continue
		}
		if i > 0 {
			b = append(b, '.')
		}
		b = append(b, s.name...)
	}
	return string(b)
}
