package strictjson

import (
	"bytes"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx"
)

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
