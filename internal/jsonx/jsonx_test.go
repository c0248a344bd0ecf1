package jsonx

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/svcdev/svc/internal/jsonx/jsonxtest"
)

// The scanners run on every upstream answer, streamed chunk and request body, so the fuzz targets hold
// them to encoding/json on valid input and to "never panics, always ends" on any input. Seed corpora
// live in testdata/fuzz/<FuzzName>/; run one with
// go test -run '^$' -fuzz '^FuzzField$' -fuzztime 30s ./internal/jsonx/

func FuzzField(f *testing.F) {
	f.Add([]byte(`{"id":"c1","model":"m","choices":[{"index":0}]}`), "choices")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		got := Field(data, key)
		m, ok := jsonxtest.TopLevel(data)
		if !ok {
			return
		}
		want, present := m[key]
		if !present {
			if got != nil {
				t.Fatalf("Field(%s, %q) = %s, want nothing", data, key, got)
			}
			return
		}
		if !jsonxtest.Same(got, want) {
			t.Fatalf("Field(%s, %q) = %s, want %s", data, key, got, want)
		}
	})
}

func FuzzStringValue(f *testing.F) {
	f.Add([]byte(`"a \"q\" \u00e9\n"`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := String(raw)
		var want string
		// Held to: a string token exactly, as field returns it (no surrounding space).
		if !utf8.Valid(raw) || json.Unmarshal(raw, &want) != nil || len(raw) == 0 || raw[0] != '"' || raw[len(raw)-1] != '"' {
			return
		}
		if got != want {
			t.Fatalf("String(%s) = %q, want %q", raw, got, want)
		}
	})
}

func FuzzUnquote(f *testing.F) {
	for _, s := range []string{`""`, `"plain"`, `"a \"q\" \u00e9\n\t\b\f\r\/\\"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00\ud83d"`,
		`"\ud83d\u0041"`, `"\u12"`, `"\x"`, "\"tab\tin\"", "\"caf\xc3\xa9\"", "\"bad \xff\"", `"\u2028<>&"`, `"a\"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Unquote(raw)
		var want string
		err := json.Unmarshal(raw, &want)
		token := len(raw) > 0 && raw[0] == '"' && raw[len(raw)-1] == '"' // a string token alone, no space around it
		switch {
		case ok && (err != nil || !token):
			t.Fatalf("Unquote(%q) = %q, ok; encoding/json: %v", raw, got, err)
		case ok && got != want:
			t.Fatalf("Unquote(%q) = %q, encoding/json %q", raw, got, want)
		case !ok && err == nil && token && utf8.Valid(raw):
			t.Fatalf("Unquote(%q) refused what encoding/json reads as %q", raw, want)
		}
	})
}

func FuzzIntValue(f *testing.F) {
	f.Add([]byte(`1732000000`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := Int(raw)
		// Held to: the non-negative integers that fit (timestamps, indexes); anything else is 0 or less.
		want, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil || want < 0 || raw[0] == '+' || (len(raw) > 1 && raw[0] == '0') {
			return
		}
		if got != want {
			t.Fatalf("Int(%s) = %d, want %d", raw, got, want)
		}
	})
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "llama-3.1-8b", "a\"b", "<tag>", "caf\u00e9", "\x00", "\xff", "tab\t"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Held to json.Marshal byte for byte: the fast path only takes what it writes unchanged.
		want, _ := json.Marshal(s)
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, want %s", s, got[1:], want)
		}
	})
}

func FuzzInteger(f *testing.F) {
	for _, s := range []string{"0", "-0", "7", "-7", "9223372036854775807", "-9223372036854775808", "9223372036854775808",
		"-9223372036854775809", "1.0", "1e3", "01", "-", "", "\"5\"", "null", " 5", "99999999999999999999"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, ok := Integer(raw)
		// Held to encoding/json decoding the same bytes, a number token alone (not null, which decodes
		// without error, nor a number with spaces around it), into an int64.
		var want int64
		number := json.Valid(raw) && len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9') &&
			raw[len(raw)-1] >= '0' && raw[len(raw)-1] <= '9'
		wantOK := number && json.Unmarshal(raw, &want) == nil
		if ok != wantOK || ok && got != want {
			t.Fatalf("Integer(%q) = %d, %v; encoding/json: %d, %v", raw, got, ok, want, wantOK)
		}
	})
}

func TestChunkScan(t *testing.T) {
	data := []byte(`{"id":"c1","object":"chat.completion.chunk","created":17,"model":"m","choices":[{"index":0,"delta":{"content":"a \"q\"","role":"assistant"},"logprobs":null,"finish_reason":null},{"index":1,"delta":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	if got := String(Field(data, "id")); got != "c1" {
		t.Errorf("id %q", got)
	}
	if got := Int(Field(data, "created")); got != 17 {
		t.Errorf("created %d", got)
	}
	var contents, finishes []string
	c := NewCursor(Field(data, "choices"))
	c.Array(func() {
		c.Object(func(name []byte) {
			switch string(name) {
			case "delta":
				c.Object(func(name []byte) {
					if string(name) == "content" {
						contents = append(contents, c.String())
					}
				})
			case "finish_reason":
				finishes = append(finishes, c.String())
			}
		})
	})
	if strings.Join(contents, "|") != `a "q"|b` || strings.Join(finishes, "|") != "|stop" {
		t.Errorf("choices %q %q", contents, finishes)
	}
	if string(Field(data, "usage")) != `{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}` {
		t.Errorf("usage %s", Field(data, "usage"))
	}
	// Keys inside nested values are not taken for top-level ones.
	if f := Field([]byte(`{"a":{"id":"inner"},"b":["id"],"id":"outer"}`), "id"); string(f) != `"outer"` {
		t.Errorf("nested id: %s", f)
	}
}

// TestMalformedChoicesEnd: a malformed choices array in an upstream chunk (here a stray brace) ends the
// scan instead of looping on it forever, which exhausted memory (found by fuzzing an earlier scanner).
func TestMalformedChoicesEnd(t *testing.T) {
	done := make(chan int, 1)
	go func() {
		n := 0
		c := NewCursor([]byte(`{"model":"up","choices":[{"index":0},}]}`))
		c.Object(func(name []byte) {
			if string(name) == "choices" {
				c.Array(func() { n++; c.Raw() })
			}
		})
		done <- n
	}()
	select {
	case n := <-done:
		if n != 1 {
			t.Errorf("%d elements before the stray brace, want 1", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("elements did not end on a malformed array")
	}
}

func FuzzObject(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true,"a":1,"a":2,"\\u00e9":null}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !utf8.Valid(data) || !json.Valid(data) {
			return
		}
		got := Object(data)
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil || want == nil {
			if got != nil {
				t.Fatalf("Object(%s) = %v, want nil (not an object)", data, got)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("Object(%s): %d members, want %d", data, len(got), len(want))
		}
		for k, v := range want {
			if !jsonxtest.Same(got[k], v) {
				t.Fatalf("Object(%s)[%q] = %s, want %s", data, k, got[k], v)
			}
		}
	})
}

// walk reads the value at c with the cursor alone, as encoding/json would decode it into any.
func walk(c *Cursor) any {
	switch c.Kind() {
	case '{':
		m := map[string]any{}
		c.Object(func(name []byte) { m[string(name)] = walk(c) })
		return m
	case '[':
		a := []any{}
		c.Array(func() { a = append(a, walk(c)) })
		return a
	}
	var v any
	if json.Unmarshal(c.Raw(), &v) != nil {
		c.bad = true
	}
	return v
}

func FuzzCursor(f *testing.F) {
	f.Add([]byte(`{"id":"c1","choices":[{"index":0,"delta":{"content":"a\"b","tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":null}],"usage":{"prompt_tokens":3},"\u0069d":2, "e":[], "o":{} }`))
	f.Add([]byte(`[1, "x", [true, null], {"a": -1.5e3}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := NewCursor(data)
		got := walk(c)
		var want any
		if !utf8.Valid(data) || json.Unmarshal(data, &want) != nil {
			return // any input: it must only end, without panicking
		}
		if c.Bad() {
			t.Fatalf("cursor over valid %s went bad", data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("cursor read %s as %v, want %v", data, got, want)
		}
	})
}

// A reader that leaves values unread still gets the ones it asks for: the cursor skips the rest.
func TestCursorSkipsUnreadValues(t *testing.T) {
	c := NewCursor([]byte(`{"a":{"x":[1,{"y":"}"}]},"b":[{"n":1},{"n":2}],"c":"last"}`))
	var ns []int64
	var last string
	c.Object(func(name []byte) {
		switch string(name) {
		case "b":
			c.Array(func() {
				c.Object(func(name []byte) {
					if string(name) == "n" {
						ns = append(ns, c.Int())
					}
				})
			})
		case "c":
			last = c.String()
		}
	})
	if c.Bad() || len(ns) != 2 || ns[1] != 2 || last != "last" {
		t.Fatalf("bad %v, ns %v, last %q", c.Bad(), ns, last)
	}
}

// Compact writes what json.Compact writes of any valid JSON.
func FuzzCompact(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : [ 1 , 2 ] } `, `"a b"`, `{"k":"v \" } \\\\ ","n":null}`, "[\n\t1,\r\n\"x\"\n]", `{"type":"object","properties":{"city":{"type":"string"}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !json.Valid(data) {
			return
		}
		var want bytes.Buffer
		if err := json.Compact(&want, data); err != nil {
			t.Fatal(err)
		}
		if got := Compact(data); !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("Compact(%q) = %q, want %q", data, got, want.Bytes())
		}
	})
}
