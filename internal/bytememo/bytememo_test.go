package bytememo

import (
	"strconv"
	"strings"
	"testing"
)

// A value is found only under the very bytes it was kept under, and the memo forgets its oldest
// values past its bounds.
func TestMemoKeepsToItsBytesAndBounds(t *testing.T) {
	m := New[int](3, 400)
	raw := []byte(`["a","b"]`)
	_, key, ok := m.Get(raw)
	if ok {
		t.Fatal("found in an empty memo")
	}
	m.Put(key, raw, 0, 1)
	raw[1] = 'x' // the memo keeps a copy
	if _, ok := m.At(key, []byte(`["a","b"]`)); !ok {
		t.Error("not found under its bytes")
	}
	if _, ok := m.At(key, raw); ok {
		t.Error("found under other bytes with the same key")
	}
	for i := 2; i <= 4; i++ {
		b := []byte(strconv.Itoa(i))
		_, k, _ := m.Get(b)
		m.Put(k, b, 0, i)
	}
	if _, _, ok := m.Get([]byte(`["a","b"]`)); ok {
		t.Error("the oldest of four kept in three entries")
	}
	big := []byte(strings.Repeat("x", 101)) // over a quarter of the bytes: not kept
	_, k, _ := m.Get(big)
	m.Put(k, big, 0, 5)
	if _, _, ok := m.Get(big); ok {
		t.Error("a value over a quarter of the memo kept")
	}
	for i := 0; i < 5; i++ { // 5 × 95 bytes: the oldest go
		b := []byte(strings.Repeat(strconv.Itoa(i), 95))
		_, k, _ := m.Get(b)
		m.Put(k, b, 0, i)
	}
	if m.bytes > 400 || len(m.order) > 3 {
		t.Errorf("%d bytes in %d entries", m.bytes, len(m.order))
	}
}

// The values kept are found only where an array begins with their bytes up to an element's end, the
// longest of them, and are forgotten past their bounds.
func TestPrefixed(t *testing.T) {
	m := NewPrefixed[string](4, 1<<20, 2)
	head := `["` + strings.Repeat("a system prompt ", 10) + `"`
	kept := head + `,12`
	m.Put([]byte(kept), 2, 0, "two")
	for b, found := range map[string]bool{kept + `]`: true, kept + " \n, \"x\"]": true, kept + `3]`: false, kept + `.5]`: false,
		kept: false, head + `,13]`: false, head + `]`: false} {
		v, count, end := m.Longest([]byte(b), func(string) bool { return true })
		if (end > 0) != found || found && (v != "two" || count != 2 || end != len(kept)) {
			t.Errorf("Longest(…%s) = %q, %d, %d; want found %v", b[len(head):], v, count, end, found)
		}
	}
	// The longest of those filed under one head that the caller takes; the oldest of a head past
	// perHead forgotten.
	longer := kept + `,{"k":"v"}`
	m.Put([]byte(longer), 3, 0, "three")
	if v, count, _ := m.Longest([]byte(longer+`,1]`), func(string) bool { return true }); v != "three" || count != 3 {
		t.Errorf("Longest = %q, %d", v, count)
	}
	if v, _, _ := m.Longest([]byte(longer+`,1]`), func(v string) bool { return v != "three" }); v != "two" {
		t.Errorf("Longest refusing three = %q", v)
	}
	m.Put([]byte(longer+`,2`), 4, 0, "four")
	if _, _, end := m.Longest([]byte(kept+`]`), func(string) bool { return true }); end != 0 {
		t.Error("the oldest of three under one head, with room for two, kept")
	}
	if _, _, end := m.Longest([]byte(`["short"]`), func(string) bool { return true }); end != 0 {
		t.Error("found for an array shorter than a head")
	}
	for i := range 5 {
		m.Put([]byte(`["`+strconv.Itoa(i)+strings.Repeat("x", 200)+`"`), 1, 0, "x")
	}
	if len(m.order) != 4 || len(m.byHead) != 4 || m.bytes > 4*220 {
		t.Errorf("%d kept, %d heads, %d bytes", len(m.order), len(m.byHead), m.bytes)
	}
}

// Elements tells apart the elements of an array, or of its rest after an element.
func TestElements(t *testing.T) {
	raw := []byte(` [ {"a":"x\"]"} , [1,2],"s" ] ,"after":[9]`)
	items, ends, ok := Elements(raw, 0)
	want := []string{`{"a":"x\"]"}`, `[1,2]`, `"s"`}
	if !ok || len(items) != len(want) {
		t.Fatalf("items %q, ok %v", items, ok)
	}
	for i := range want {
		if string(items[i]) != want[i] || string(raw[ends[i]-len(want[i]):ends[i]]) != want[i] {
			t.Errorf("item %d = %s, ends at %d", i, items[i], ends[i])
		}
	}
	rest, restEnds, ok := Elements(raw, ends[0])
	if !ok || len(rest) != 2 || string(rest[0]) != `[1,2]` || restEnds[1] != ends[2] {
		t.Errorf("after the first: %q %v %v", rest, restEnds, ok)
	}
	if rest, _, ok := Elements(raw, ends[2]); !ok || rest != nil {
		t.Errorf("after the last: %q %v", rest, ok)
	}
	if rest, _, ok := Elements([]byte(` [ ] `), 0); !ok || rest != nil {
		t.Errorf("empty: %q %v", rest, ok)
	}
	for _, bad := range []string{`{"a":1}`, `[1,`, `[1 2]`, ``, `[}]`, `[1,]`} {
		if _, _, ok := Elements([]byte(bad), 0); ok {
			t.Errorf("Elements(%s) ok", bad)
		}
	}
	if _, _, ok := Elements([]byte(`[1 2]`), 2); ok {
		t.Error("a rest that is no rest of an array")
	}
}

// Offered says whether an array's head came before: not the first time, then yes, for each head of
// its own, and never for an array shorter than a head.
func TestOffered(t *testing.T) {
	m := NewPrefixed[string](4, 1<<20, 2)
	a := []byte(`["` + strings.Repeat("a system prompt ", 10) + `","first"]`)
	b := []byte(`["` + strings.Repeat("another prompt. ", 10) + `","first"]`)
	if m.Offered(a) || m.Offered(b) {
		t.Fatal("a head offered for the first time was seen before")
	}
	again := append([]byte(nil), a[:HeadLen]...)
	again = append(again, `","another turn"]`...)
	if !m.Offered(again) || !m.Offered(b) {
		t.Error("a head offered again was not seen before")
	}
	if short := []byte(`["short"]`); m.Offered(short) || m.Offered(short) {
		t.Error("an array shorter than a head offered")
	}
}
