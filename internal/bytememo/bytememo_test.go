package bytememo

import (
	"hash/maphash"
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

// Prefixes tells an array's elements apart, as far as the array goes, and keys each prefix as
// maphash.Bytes would; Longest finds the longest one kept.
func TestPrefixes(t *testing.T) {
	seed := maphash.MakeSeed()
	raw := []byte(` [ {"a":"x\"]"} , [1,2],"s" ] ,"after":[9]`)
	items, ends, keys, ok := Prefixes(raw, seed)
	want := []string{`{"a":"x\"]"}`, `[1,2]`, `"s"`}
	if !ok || len(items) != len(want) {
		t.Fatalf("items %q, ok %v", items, ok)
	}
	for i := range want {
		if string(items[i]) != want[i] || string(raw[ends[i]-len(want[i]):ends[i]]) != want[i] {
			t.Errorf("item %d = %s, ends at %d", i, items[i], ends[i])
		}
		if keys[i] != maphash.Bytes(seed, raw[:ends[i]]) {
			t.Errorf("key %d", i)
		}
	}
	for _, bad := range []string{`{"a":1}`, `[1,`, `[1 2]`, ``} {
		if _, _, _, ok := Prefixes([]byte(bad), seed); ok {
			t.Errorf("Prefixes(%s) ok", bad)
		}
	}
	m := New[string](8, 1<<20)
	m.seed = seed
	m.Put(keys[1], raw[:ends[1]], 0, "two")
	m.Put(keys[0], raw[:ends[0]], 0, "one")
	if v, n := m.Longest(raw, ends, keys, func(string) bool { return true }); v != "two" || n != 2 {
		t.Errorf("Longest = %q, %d", v, n)
	}
	if v, n := m.Longest(raw, ends, keys, func(v string) bool { return v != "two" }); v != "one" || n != 1 {
		t.Errorf("Longest refusing two = %q, %d", v, n)
	}
}
