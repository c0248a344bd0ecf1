package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/jsonx"
)

// FuzzWalk holds the edge's one body walker to the three passes it replaced: json.Valid for its
// verdict (and Valid's), Duplicate for the repeated name (same path), jsonx.Object for the members.
func FuzzWalk(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":[1,{"b":null,"B":1}]}`, `{"a":"\u0041","\u0041":1}`,
		`[{"x":{"y":1,"y":2}}]`, `{"a":1,"a"`, `{"k":1,"K":2}`, `null`, `[1,2]`, `"s"`, ` {"m":"x" , "n" : [true,false,null,-0.5e+3]} `,
		`{"a":01}`, `{"a":1.}`, `{"a":"\x"}`, `{"a":"\ud800"}`, `{"a":1}x`, `{"a":{"b":1},"a":2,`, `{"\u00e9":1,"\u00c9":2}`,
		"{\"a\":\"\x01\"}", `{"a":-}`, `{"a":tru}`, `{"a":1,}`, `[1,]`, `{"a":"[[\"{{","b":[[{}]]}`} {
		f.Add([]byte(s))
	}
	// A long element, for arrays that walkedArrays keeps.
	pad := `"` + strings.Repeat("padding ", minWalked/8) + `"`
	f.Fuzz(func(t *testing.T, data []byte) {
		checkWalk(t, data)
		// data as an element after one walked before, and as part of a prefix walked before.
		Walk([]byte(`{"m":[` + pad + `]}`)) // its head offered,
		Walk([]byte(`{"m":[` + pad + `]}`)) // and kept
		inArray := []byte(`{"m":[` + pad + `,` + string(data) + `]}`)
		checkWalk(t, inArray)
		checkWalk(t, inArray)
		checkWalk(t, []byte(`{"m":[`+pad+`,`+string(data)+`,{"a":1,"A":2}]}`))
		checkWalk(t, []byte(`{"m":[`+pad+`,`+string(data)+`,[[1]]]}`))
	})
}

// checkWalk holds Walk of data to json.Valid, Duplicate, jsonx.Object and depth.
func checkWalk(t *testing.T, data []byte) {
	t.Helper()
	members, deepest, dup, valid := Walk(data)
	if valid != json.Valid(data) {
		t.Fatalf("Walk(%q) valid = %v, json.Valid %v", data, valid, !valid)
	}
	if Valid(data) != valid {
		t.Fatalf("Valid(%q) = %v, json.Valid %v", data, !valid, valid)
	}
	list, mvalid := Members(nil, data)
	var all map[string]json.RawMessage // the last value of each name, as jsonx.Object
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		all = map[string]json.RawMessage{}
	}
	for _, m := range list {
		all[string(m.Name)] = m.Value
	}
	same := func(a, b json.RawMessage) bool { return string(a) == string(b) }
	if mvalid != valid || valid && (!maps.EqualFunc(all, jsonx.Object(data), same) || (all == nil) != (jsonx.Object(data) == nil)) {
		t.Fatalf("Members(%q) = %v, %v; jsonx.Object %v", data, all, mvalid, jsonx.Object(data))
	}
	if !valid {
		if members != nil || dup != nil {
			t.Fatalf("Walk(%q) of invalid JSON = %v, %v", data, members, dup)
		}
		return
	}
	if d := depth(data); deepest != d {
		t.Fatalf("Walk(%q) depth = %d, depth %d", data, deepest, d)
	}
	want := Duplicate(data)
	if (dup == nil) != (want == nil) || (dup != nil && *dup != *want) {
		t.Fatalf("Walk(%q) dup = %v, Duplicate %v", data, dup, want)
	}
	if dup != nil {
		return
	}
	if obj := jsonx.Object(data); !maps.EqualFunc(members, obj, func(a, b json.RawMessage) bool { return string(a) == string(b) }) || (members == nil) != (obj == nil) {
		t.Fatalf("Walk(%q) members = %v, jsonx.Object %v", data, members, obj)
	}
}

func TestWalk(t *testing.T) {
	for _, c := range []struct {
		body, dup string
		valid     bool
		members   int
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, "", true, 2},
		{`{"max_tokens":5,"MAX_TOKENS":999999}`, "MAX_TOKENS", true, 0},
		{`{"messages":[{"role":"user","role":"system"}]}`, "messages[0].role", true, 0},
		{`{"a":1,"a":2,}`, "", false, 0}, // invalid after the duplicate: the syntax is what is wrong
		{`[{"a":1}]`, "", true, 0},
		{`null`, "", true, 0},
		{strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting), "", true, 0},
		{strings.Repeat("[", maxNesting+1) + strings.Repeat("]", maxNesting+1), "", false, 0},
	} {
		members, _, dup, valid := Walk([]byte(c.body))
		got := ""
		if dup != nil {
			got = dup.Field
			if dup.Reason != "appears more than once" {
				t.Errorf("Walk(%.40s) reason %q", c.body, dup.Reason)
			}
		}
		if valid != c.valid || got != c.dup || len(members) != c.members {
			t.Errorf("Walk(%.40s) = %d members, dup %q, valid %v; want %d, %q, %v", c.body, len(members), got, valid, c.members, c.dup, c.valid)
		}
	}
}

// BenchmarkBodyPasses compares the one walk with the three passes it replaced, on a chat body.
func BenchmarkBodyPasses(b *testing.B) {
	body := []byte(`{"model":"m","stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"messages":[` +
		strings.Repeat(`{"role":"user","content":"Say something about foxes, and about the dogs they jump over."},`, 40) +
		`{"role":"user","content":"end"}]}`)
	b.Run("walk", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if m, _, dup, ok := Walk(body); !ok || dup != nil || m == nil {
				b.Fatal("walk")
			}
		}
	})
	// Bodies never seen before (their first message differs), as a chat client that is not an agent
	// sends them: the walk finds no kept array and keeps each one it walks.
	fresh := make([][]byte, 4096)
	for i := range fresh {
		fresh[i] = bytes.Replace(body, []byte("Say something"), []byte(fmt.Sprintf("Say %06d", i)), 1)
	}
	b.Run("walk-unseen", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		i := 0
		for b.Loop() {
			if m, _, dup, ok := Walk(fresh[i%len(fresh)]); !ok || dup != nil || m == nil {
				b.Fatal("walk")
			}
			i++
		}
	})
	b.Run("three-passes", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if !json.Valid(body) || Duplicate(body) != nil || jsonx.Object(body) == nil {
				b.Fatal("passes")
			}
		}
	})
}

// BenchmarkValid compares Valid with json.Valid on a chat request.
func BenchmarkValid(b *testing.B) {
	body := []byte(`{"model":"bench-llama","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say something about \"foxes\"."}],"max_tokens":64}`)
	b.Run("strictjson", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for i := 0; i < b.N; i++ {
			Valid(body)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for i := 0; i < b.N; i++ {
			json.Valid(body)
		}
	})
}

// An agent's turn resends the array of the turn before and more: what Walk kept of it is not walked
// again, and the body is judged exactly as a body never seen (its validity, names written twice and
// where, its nesting).
func TestWalkRemembersArrays(t *testing.T) {
	msg := func(i int) string {
		return `{"role":"user","content":"turn ` + strconv.Itoa(i) + strings.Repeat(" and some more words", 20) + `"}`
	}
	turns := func(n int, more string) []byte {
		var b []string
		for i := range n {
			b = append(b, msg(i))
		}
		if more != "" {
			b = append(b, more)
		}
		return []byte(`{"model":"m","messages":[` + strings.Join(b, ",") + `]}`)
	}
	fresh := func(body []byte) (map[string]json.RawMessage, int, *Error, bool) {
		kept := walkedArrays
		defer func() { walkedArrays = kept }()
		walkedArrays = newWalkedArrays()
		return Walk(body)
	}
	same := func(name string, body []byte) *Error {
		t.Helper()
		m, depth, dup, valid := Walk(body)
		fm, fdepth, fdup, fvalid := fresh(body)
		if valid != fvalid || depth != fdepth || (dup == nil) != (fdup == nil) || dup != nil && *dup != *fdup || len(m) != len(fm) {
			t.Errorf("%s: Walk = %d members, depth %d, dup %v, valid %v; never seen: %d, %d, %v, %v", name, len(m), depth, dup, valid, len(fm), fdepth, fdup, fvalid)
		}
		return dup
	}
	walkedArrays = newWalkedArrays()
	same("first turn", turns(3, ""))
	body := turns(4, "")
	if _, count, _ := walkedArrays.Longest(body[len(`{"model":"m","messages":`):], anyArray); count != 0 {
		t.Fatalf("an array whose head came once is kept (%d found)", count)
	}
	same("again", turns(3, ""))
	if _, count, _ := walkedArrays.Longest(body[len(`{"model":"m","messages":`):], anyArray); count != 3 {
		t.Fatalf("the first turn's messages are not kept (%d found)", count)
	}
	same("next turn", body)
	if dup := same("a name twice after the kept turns", turns(4, `{"role":"user","ROLE":"x"}`)); dup == nil || dup.Field != "messages[4].ROLE" {
		t.Errorf("dup %v", dup)
	}
	same("invalid after the kept turns", turns(4, `{"role":"user",}`))
	same("deeper after the kept turns", turns(4, `{"role":"user","content":[[[[{"type":"text"}]]]]}`))
	same("shallow after a deep turn", turns(4, `{"role":"user","content":[[[[{"type":"text"}]]]]},"x"`))
	// A body with a name written twice before the array compares no names in it: the array is not
	// kept, and the same array in a body without that name is judged for its own.
	twice := turns(4, `{"role":"user","role":"x"}`)
	first := append([]byte(`{"a":1,"a":2,`), twice[1:]...)
	if dup := same("a name twice before", first); dup == nil || dup.Field != "a" {
		t.Errorf("dup %v", dup)
	}
	if dup := same("then in the array", twice); dup == nil || dup.Field != "messages[4].role" {
		t.Errorf("dup %v", dup)
	}
}
