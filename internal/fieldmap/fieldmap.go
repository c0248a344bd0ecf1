// Package fieldmap copies a struct's fields into another struct's fields of the same name, converting
// between the forms one value takes in the store, on the wire and in the API (docs/ARCHITECTURE.md, "A
// run has one shape from the edge to the store"), so that a new field needs no line of mapping code.
package fieldmap

import (
	"database/sql"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unsafe"
)

// Map copies an S into a D. It is built once (New) and then copies without allocating, except where a
// conversion must make a value (a string of bytes, a pointer to a time), at about the cost of the same
// assignments written by hand: each field is reached at its offset, found once by reflection. (The two
// structs escape to the heap, as escape analysis cannot see through the conversions: copy between
// structs that live there already, such as slice elements, where allocations count.)
//
// A field of D takes the field of S with the same name, case aside (TTFTMs takes TtftMs); a field named
// XMs of an integer type takes a time.Duration field X as milliseconds, and a time.Duration field X takes
// an integer field XMs. Fields of embedded structs count as the outer struct's, as Go promotes them
// (embedded pointers are not followed). The conversions are those of one value between svc's forms:
//
//   - the same type; integers of any size; strings and named strings; bytes and strings;
//   - time.Time and milliseconds (int64), sql.NullInt64 (the zero time is NULL) or *time.Time (nil);
//   - string and sql.NullString ("" is NULL) or *string ("" is nil).
//
// Two fields of the same name that no rule converts are a programming error: New panics, so that the
// first test to build the map fails. Fields of D that no field of S feeds are left alone and listed by
// Unfed, and fields of S that feed none by Unread, for the tests that hold a pair of types to their
// mapping.
type Map[D, S any] struct {
	steps  []step
	unfed  []string
	unread []string
}

// step sets the field at dst's offset from the field at src's.
type step struct {
	dst, src uintptr
	conv     func(dst, src unsafe.Pointer)
}

// New builds the map from S to D. skip names fields of D that the caller sets itself: they are neither
// copied nor listed by Unfed, and the fields of S of those names are not listed by Unread.
func New[D, S any](skip ...string) *Map[D, S] {
	dt, st := reflect.TypeFor[D](), reflect.TypeFor[S]()
	skipped := map[string]bool{}
	for _, n := range skip {
		skipped[strings.ToLower(n)] = true
	}
	srcs := map[string]field{}
	for _, f := range fieldList(st) {
		srcs[strings.ToLower(f.Name)] = f
	}
	m := &Map[D, S]{}
	read := map[uintptr]bool{}
	add := func(d, s field, conv func(dst, src unsafe.Pointer)) {
		m.steps = append(m.steps, step{d.offset, s.offset, conv})
		read[s.offset] = true
	}
	for _, df := range fieldList(dt) {
		name := strings.ToLower(df.Name)
		if skipped[name] {
			continue
		}
		sf, ok := srcs[name]
		if !ok {
			// XMs ← Duration X, and Duration X ← XMs.
			if base, isMs := strings.CutSuffix(name, "ms"); isMs && isInt(df.Type) {
				if f, ok := srcs[base]; ok && f.Type == durationType {
					set := setInt(df.Type)
					add(df, f, func(dst, src unsafe.Pointer) { set(dst, (*time.Duration)(src).Milliseconds()) })
					continue
				}
			}
			if df.Type == durationType {
				if f, ok := srcs[name+"ms"]; ok && isInt(f.Type) {
					get := getInt(f.Type)
					add(df, f, func(dst, src unsafe.Pointer) { *(*time.Duration)(dst) = time.Duration(get(src)) * time.Millisecond })
					continue
				}
			}
			m.unfed = append(m.unfed, df.Name)
			continue
		}
		conv := converter(df.Type, sf.Type)
		if conv == nil {
			panic(fmt.Sprintf("fieldmap: %s.%s (%s) cannot take %s.%s (%s)", dt, df.Name, df.Type, st, sf.Name, sf.Type))
		}
		add(df, sf, conv)
	}
	for _, sf := range fieldList(st) {
		if !read[sf.offset] && !skipped[strings.ToLower(sf.Name)] {
			m.unread = append(m.unread, sf.Name)
		}
	}
	return m
}

// Copy sets dst's fields from src's.
func (m *Map[D, S]) Copy(dst *D, src *S) {
	d, s := unsafe.Pointer(dst), unsafe.Pointer(src)
	for i := range m.steps {
		st := &m.steps[i]
		st.conv(unsafe.Add(d, st.dst), unsafe.Add(s, st.src))
	}
}

// Unfed lists the fields of D that no field of S feeds (skipped fields aside), in D's order.
func (m *Map[D, S]) Unfed() []string { return m.unfed }

// Unread lists the fields of S that feed no field of D (skipped names aside), in S's order.
func (m *Map[D, S]) Unread() []string { return m.unread }

// field is an exported field of a struct with its offset from the struct's start.
type field struct {
	reflect.StructField
	offset uintptr
}

// fieldList is t's exported fields, those of embedded structs in their place (the embedded struct itself
// is not a field of its own; an embedded pointer is neither followed nor a field).
func fieldList(t reflect.Type) []field {
	var out []field
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		off, ok := offsetOf(t, f.Index)
		if !ok {
			continue // behind an embedded pointer
		}
		out = append(out, field{f, off})
	}
	return out
}

// offsetOf is the offset of the field at index in t, false when the path goes through a pointer.
func offsetOf(t reflect.Type, index []int) (uintptr, bool) {
	var off uintptr
	for i, n := range index {
		if i > 0 {
			if t.Kind() != reflect.Struct {
				return 0, false
			}
		}
		f := t.Field(n)
		off += f.Offset
		t = f.Type
	}
	return off, true
}

var (
	durationType   = reflect.TypeFor[time.Duration]()
	timeType       = reflect.TypeFor[time.Time]()
	timePtrType    = reflect.TypeFor[*time.Time]()
	nullInt64Type  = reflect.TypeFor[sql.NullInt64]()
	nullStringType = reflect.TypeFor[sql.NullString]()
	stringPtrType  = reflect.TypeFor[*string]()
)

func isInt(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return t != durationType
	}
	return false
}

func isBytes(t reflect.Type) bool {
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
}

// getInt reads an integer of t's size.
func getInt(t reflect.Type) func(p unsafe.Pointer) int64 {
	switch t.Kind() {
	case reflect.Int8:
		return func(p unsafe.Pointer) int64 { return int64(*(*int8)(p)) }
	case reflect.Int16:
		return func(p unsafe.Pointer) int64 { return int64(*(*int16)(p)) }
	case reflect.Int32:
		return func(p unsafe.Pointer) int64 { return int64(*(*int32)(p)) }
	case reflect.Int:
		return func(p unsafe.Pointer) int64 { return int64(*(*int)(p)) }
	}
	return func(p unsafe.Pointer) int64 { return *(*int64)(p) }
}

// setInt writes an integer of t's size.
func setInt(t reflect.Type) func(p unsafe.Pointer, v int64) {
	switch t.Kind() {
	case reflect.Int8:
		return func(p unsafe.Pointer, v int64) { *(*int8)(p) = int8(v) }
	case reflect.Int16:
		return func(p unsafe.Pointer, v int64) { *(*int16)(p) = int16(v) }
	case reflect.Int32:
		return func(p unsafe.Pointer, v int64) { *(*int32)(p) = int32(v) }
	case reflect.Int:
		return func(p unsafe.Pointer, v int64) { *(*int)(p) = int(v) }
	}
	return func(p unsafe.Pointer, v int64) { *(*int64)(p) = v }
}

// converter is the conversion from a value of type s to one of type d, nil when there is none. Strings
// and byte slices are read through their kinds' layouts, which named types share.
func converter(d, s reflect.Type) func(dst, src unsafe.Pointer) {
	switch {
	case d == s:
		return same(d)
	case isInt(d) && isInt(s):
		get, set := getInt(s), setInt(d)
		return func(dst, src unsafe.Pointer) { set(dst, get(src)) }
	case d.Kind() == reflect.String && s.Kind() == reflect.String:
		return func(dst, src unsafe.Pointer) { *(*string)(dst) = *(*string)(src) }
	case d.Kind() == reflect.String && isBytes(s):
		return func(dst, src unsafe.Pointer) { *(*string)(dst) = string(*(*[]byte)(src)) }
	case isBytes(d) && s.Kind() == reflect.String:
		return func(dst, src unsafe.Pointer) {
			if v := *(*string)(src); v != "" {
				*(*[]byte)(dst) = []byte(v)
				return
			}
			*(*[]byte)(dst) = nil
		}
	case s == timeType:
		return fromTime(d)
	case d == timeType:
		return toTime(s)
	case s.Kind() == reflect.String:
		return fromString(d)
	case d.Kind() == reflect.String:
		return toString(s)
	}
	return nil
}

// same copies a value of one type: directly for the kinds of a record, through reflect otherwise.
func same(t reflect.Type) func(dst, src unsafe.Pointer) {
	switch {
	case t.Kind() == reflect.String:
		return func(dst, src unsafe.Pointer) { *(*string)(dst) = *(*string)(src) }
	case isInt(t) || t == durationType:
		get, set := getInt(t), setInt(t)
		return func(dst, src unsafe.Pointer) { set(dst, get(src)) }
	case t.Kind() == reflect.Bool:
		return func(dst, src unsafe.Pointer) { *(*bool)(dst) = *(*bool)(src) }
	case t == timeType:
		return func(dst, src unsafe.Pointer) { *(*time.Time)(dst) = *(*time.Time)(src) }
	case t == nullStringType:
		return func(dst, src unsafe.Pointer) { *(*sql.NullString)(dst) = *(*sql.NullString)(src) }
	case t == nullInt64Type:
		return func(dst, src unsafe.Pointer) { *(*sql.NullInt64)(dst) = *(*sql.NullInt64)(src) }
	case isBytes(t):
		return func(dst, src unsafe.Pointer) { *(*[]byte)(dst) = *(*[]byte)(src) }
	}
	return func(dst, src unsafe.Pointer) { reflect.NewAt(t, dst).Elem().Set(reflect.NewAt(t, src).Elem()) }
}

// fromMs is a time of the store, in UTC.
func fromMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func fromTime(d reflect.Type) func(dst, src unsafe.Pointer) {
	switch {
	case isInt(d):
		set := setInt(d)
		return func(dst, src unsafe.Pointer) { set(dst, (*time.Time)(src).UnixMilli()) }
	case d == nullInt64Type:
		return func(dst, src unsafe.Pointer) {
			t := (*time.Time)(src)
			*(*sql.NullInt64)(dst) = sql.NullInt64{Int64: t.UnixMilli(), Valid: !t.IsZero()}
		}
	case d == timePtrType:
		return func(dst, src unsafe.Pointer) {
			if t := *(*time.Time)(src); !t.IsZero() {
				*(**time.Time)(dst) = &t
				return
			}
			*(**time.Time)(dst) = nil
		}
	}
	return nil
}

func toTime(s reflect.Type) func(dst, src unsafe.Pointer) {
	switch {
	case isInt(s):
		get := getInt(s)
		return func(dst, src unsafe.Pointer) { *(*time.Time)(dst) = fromMs(get(src)) }
	case s == nullInt64Type:
		return func(dst, src unsafe.Pointer) {
			if n := (*sql.NullInt64)(src); n.Valid {
				*(*time.Time)(dst) = fromMs(n.Int64)
				return
			}
			*(*time.Time)(dst) = time.Time{}
		}
	case s == timePtrType:
		return func(dst, src unsafe.Pointer) {
			if p := *(**time.Time)(src); p != nil {
				*(*time.Time)(dst) = *p
				return
			}
			*(*time.Time)(dst) = time.Time{}
		}
	}
	return nil
}

func fromString(d reflect.Type) func(dst, src unsafe.Pointer) {
	switch d {
	case nullStringType:
		return func(dst, src unsafe.Pointer) {
			v := *(*string)(src)
			*(*sql.NullString)(dst) = sql.NullString{String: v, Valid: v != ""}
		}
	case stringPtrType:
		return func(dst, src unsafe.Pointer) {
			if v := *(*string)(src); v != "" {
				*(**string)(dst) = &v
				return
			}
			*(**string)(dst) = nil
		}
	}
	return nil
}

func toString(s reflect.Type) func(dst, src unsafe.Pointer) {
	switch s {
	case nullStringType:
		return func(dst, src unsafe.Pointer) { *(*string)(dst) = (*sql.NullString)(src).String }
	case stringPtrType:
		return func(dst, src unsafe.Pointer) {
			if p := *(**string)(src); p != nil {
				*(*string)(dst) = *p
				return
			}
			*(*string)(dst) = ""
		}
	}
	return nil
}
