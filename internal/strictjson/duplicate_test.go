package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestDuplicate(t *testing.T) {
	many := func(extra string) string {
		var b strings.Builder
		b.WriteString(`{"schema":{`)
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&b, `"p%d":{"type":"string"},`, i)
		}
		b.WriteString(extra + `"last":1}}`)
		return b.String()
	}
	cases := []struct{ in, want string }{
		{`{"max_tokens":5,"messages":[{"role":"user","content":"hi"}],"stream":true}`, ""},
		{`{"max_tokens":5,"max_tokens":999999}`, "max_tokens"},
		{`{"model":"a","MODEL":"b"}`, "MODEL"},
		{`{"a":1,"\u0061":2}`, "a"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"user","role":"system","content":"y"}]}`, "messages[1].role"},
		{`{"a":[[{"b":1}],[{"b":1,"c":{"d":1,"d":2}}]]}`, "a[1][0].c.d"},
		{`{"a":{"x":1},"b":{"x":1}}`, ""}, // the same name in two objects
		{`{"a":{"x":1},"x":1}`, ""},
		{`{"é":1,"É":2}`, "É"},
		{many(``), ""},
		{many(`"P7":1,`), "schema.P7"},
		{many(`"last":0,`), "schema.last"},
		{`[{"a":1},{"a":1}]`, ""},
		{`{"a":1,"a"`, ""}, // not JSON: its reader refuses it for that
		{`not json`, ""},
	}
	for _, c := range cases {
		e := Duplicate([]byte(c.in))
		got := ""
		if e != nil {
			got = e.Field
			if !strings.Contains(e.Error(), "appears more than once") {
				t.Errorf("%s: error %q", c.in, e.Error())
			}
		}
		if got != c.want {
			t.Errorf("Duplicate(%.80s) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The rule runs on every chat request: it allocates nothing for a body of ordinary shape.
func TestDuplicateAllocations(t *testing.T) {
	body := []byte(`{"model":"m","max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Say something about foxes."}]}]}`)
	if n := testing.AllocsPerRun(100, func() { Duplicate(body) }); n > 0 {
		t.Errorf("Duplicate allocates %v times per body", n)
	}
}

// BenchmarkDuplicate measures the rule on a chat body, beside json.Valid (which every body goes
// through anyway) for scale.
func BenchmarkDuplicate(b *testing.B) {
	body := []byte(`{"model":"m","max_tokens":64,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Say something about foxes."}]}`)
	b.Run("Duplicate", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			Duplicate(body)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			json.Valid(body)
		}
	})
}

// FuzzDuplicate holds Duplicate to a reference built on encoding/json's tokens (names decoded by it,
// compared pairwise with bytes.EqualFold) on valid JSON: the same first duplicate, named by the same
// path; and to "never panics" on anything else.
func FuzzDuplicate(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":[1,{"b":null,"B":1}]}`, `{"a":"\u0041","\u0041":1}`,
		`[{"x":{"y":1,"y":2}}]`, `{"a":1,"a"`, `{"k":1,"K":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := Duplicate(data)
		if !json.Valid(data) {
			return
		}
		want, found := referenceDuplicate(data)
		got := ""
		if e != nil {
			got = e.Field
		}
		if (e != nil) != found || got != want {
			t.Fatalf("Duplicate(%s) = %q (%v), reference %q (%v)", data, got, e != nil, want, found)
		}
	})
}

// referenceDuplicate finds the first duplicate name of a valid JSON text with encoding/json's decoder.
func referenceDuplicate(data []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var walk func(path string) (string, bool)
	walk = func(path string) (string, bool) {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return "", false
		}
		var names []string
		for i := 0; dec.More(); i++ {
			if d == '[' {
				if p, found := walk(path + "[" + strconv.Itoa(i) + "]"); found {
					return p, true
				}
				continue
			}
			kt, _ := dec.Token()
			key, _ := kt.(string)
			field := key
			if path != "" {
				field = path + "." + key
			}
			for _, n := range names {
				if bytes.EqualFold([]byte(n), []byte(key)) {
					return field, true
				}
			}
			names = append(names, key)
			if p, found := walk(field); found {
				return p, true
			}
		}
		dec.Token()
		return "", false
	}
	p, found := walk("")
	if _, err := dec.Token(); err != io.EOF && !found {
		return "", false
	}
	return p, found
}
