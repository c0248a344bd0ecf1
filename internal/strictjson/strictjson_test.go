package strictjson

import (
	"errors"
	"strings"
	"testing"
)

type target struct {
	Kind string `json:"kind"`
	Step int64  `json:"step"`
}

type body struct {
	AuthMode string   `json:"authMode"`
	Days     *int     `json:"runRetentionDays"`
	Target   target   `json:"target"`
	IDs      []string `json:"ids"`
}

func TestDecodeRefusals(t *testing.T) {
	cases := []struct {
		in, field, reason string
	}{
		{`{"authMode":"fixed_api_key","authMode":"none"}`, "authMode", "more than once"},
		{`{"authMode":"fixed_api_key","AUTHMODE":"none"}`, "AUTHMODE", "more than once"},
		{`{"target":{"kind":"a","kind":"b"}}`, "target.kind", "more than once"},
		{`{"runRetentionDays":null}`, "runRetentionDays", "must not be null"},
		{`{"ids":["a",null]}`, "ids[1]", "must not be null"},
		{`{"runRetentionDays":"7"}`, "runRetentionDays", "whole number"},
		{`{"target":{"step":1.5}}`, "target.step", "whole number"},
		{`{"nope":1}`, "nope", "not a field"},
		{`{} {}`, "", "after the JSON object"},
		{`{"authMode":"x"`, "", "ends early"},
		{`[1]`, "", "must be a JSON object"},
		{``, "", "must be a JSON object"},
		{`{"ids":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`, "", "nested more than"},
	}
	for _, tc := range cases {
		var b body
		err := Decode([]byte(tc.in), &b)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: got %v, want *Error", tc.in, err)
			continue
		}
		if (tc.field != "" && e.Field != tc.field) || !strings.Contains(e.Error(), tc.reason) {
			t.Errorf("%s: got field %q, %q; want field %q, %q", tc.in, e.Field, e.Error(), tc.field, tc.reason)
		}
	}
}

func TestDecodeTellsZeroFromAbsent(t *testing.T) {
	var absent, zero body
	if err := Decode([]byte(`{"authMode":"none"}`), &absent); err != nil || absent.Days != nil {
		t.Fatalf("absent: %v %v", err, absent.Days)
	}
	if err := Decode([]byte(`{"runRetentionDays":0}`), &zero); err != nil || zero.Days == nil || *zero.Days != 0 {
		t.Fatalf("zero: %v %v", err, zero.Days)
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1,"a":2}`, `{"a":[1,{"b":null}]}`, `{"a":"\u0041"}`, `[`, `{"a":1} x`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		err := CheckWith(data, Options{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("CheckWith returned %T, want *Error", err)
			}
		}
	})
}

// nullableInt tells null from absent, as a field named nullable must.
type nullableInt struct {
	set   bool
	value *int
}

func (n *nullableInt) UnmarshalJSON(b []byte) error {
	n.set = true
	if string(b) == "null" {
		return nil
	}
	var v int
	if err := Decode([]byte(`{"v":`+string(b)+`}`), &struct {
		V *int `json:"v"`
	}{&v}); err != nil {
		return &Error{Field: "limit", Reason: "must be a whole number or null"}
	}
	n.value = &v
	return nil
}

func TestDecodeNullableFields(t *testing.T) {
	var b struct {
		Limit nullableInt `json:"limit"`
		Other *int        `json:"other"`
	}
	if err := Decode([]byte(`{"limit":null}`), &b, "limit"); err != nil || !b.Limit.set || b.Limit.value != nil {
		t.Fatalf("null where allowed: %v %+v", err, b.Limit)
	}
	// Only the fields named: null elsewhere is still refused.
	var e *Error
	if err := Decode([]byte(`{"limit":1,"other":null}`), &b, "limit"); !errors.As(err, &e) || e.Field != "other" {
		t.Fatalf("null elsewhere: %v", err)
	}
	// A field's own *Error reaches the caller as it is.
	if err := Decode([]byte(`{"limit":"x"}`), &b, "limit"); !errors.As(err, &e) || e.Field != "limit" || !strings.Contains(e.Reason, "whole number or null") {
		t.Fatalf("own error: %v", err)
	}
}

// TestCheckWithFastPathAgrees: where null may stand anywhere, CheckWith judges a valid, shallow body
// without the token walk; it must refuse exactly what the walk refuses, with the same error.
func TestCheckWithFastPathAgrees(t *testing.T) {
	for _, s := range checkSeeds {
		assertSameVerdict(t, []byte(s))
	}
	// Nesting at the bound passes, one deeper is refused, naming where.
	o := Options{AllowNull: true, MaxDepth: 3}
	if err := CheckWith([]byte(`{"a":{"b":[1]}}`), o); err != nil {
		t.Errorf("depth 3 of 3: %v", err)
	}
	var e *Error
	if err := CheckWith([]byte(`{"a":{"b":[{}]}}`), o); !errors.As(err, &e) || e.Field != "a.b[0]" {
		t.Errorf("depth 4 of 3: %v", err)
	}
	// A body the caller checked already is judged on its depth alone.
	checked := Options{AllowNull: true, MaxDepth: 3, Checked: true}
	if err := CheckWith([]byte(`{"a":{"b":[{}]}}`), checked); !errors.As(err, &e) || e.Field != "a.b[0]" {
		t.Errorf("checked, depth 4 of 3: %v", err)
	}
	if err := CheckWith([]byte(`{"a":{"b":[1]}}`), checked); err != nil {
		t.Errorf("checked, depth 3 of 3: %v", err)
	}
	// Brackets inside strings are text, not nesting.
	if err := CheckWith([]byte(`{"a":"{{{{[[[[\"]]]]"}`), o); err != nil {
		t.Errorf("brackets in a string: %v", err)
	}
}

var checkSeeds = []string{`{}`, `{"a":1,"a":2}`, `{"a":[1,{"b":null}]}`, `{"a":"\u0041"}`, `[`, `{"a":1} x`,
	`{"a":{"b":{"c":{"d":1}}}}`, `{"a":"[[[[[[["}`, `{"a":"\"{"}`, `null`, `{"a":1,"A":2}`, ` {"x":[[[[]]]]} `,
	`{"a":1,}`, `{"a" 1}`, `"\u00"`, `{"a":[1,2,3],"b":{"a":1,"a":1}}`}

func assertSameVerdict(t *testing.T, data []byte) {
	t.Helper()
	o := Options{AllowNull: true, MaxDepth: 3}
	fast, slow := CheckWith(data, o), check(data, o)
	if (fast == nil) != (slow == nil) || (fast != nil && fast.Error() != slow.Error()) {
		t.Errorf("%q: CheckWith says %v, the walk %v", data, fast, slow)
	}
}

func FuzzCheckWithFastPath(f *testing.F) {
	for _, s := range checkSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { assertSameVerdict(t, data) })
}

// Strings must be UTF-8 text: a lone surrogate escape (which encoding/json reads as U+FFFD) is refused,
// naming the top-level field; a pair, an escaped backslash before a u, and plain text are not.
func TestLoneSurrogatesAreRefused(t *testing.T) {
	type body struct {
		Comment string `json:"comment"`
	}
	for data, field := range map[string]string{
		`{"comment":"\ud800"}`:         "comment",
		`{"comment":"a\udc00b"}`:       "comment",
		`{"comment":"\ud800\u0041"}`:   "comment",
		`{"comment":"\ud83d\ude00"}`:   "-",
		`{"comment":"\\ud800"}`:        "-",
		`{"comment":"caf\u00e9 \\\\"}`: "-",
	} {
		var v body
		err := Decode([]byte(data), &v)
		var se *Error
		switch {
		case field == "-" && err != nil:
			t.Errorf("%s: %v, want it read", data, err)
		case field != "-" && (!errors.As(err, &se) || se.Field != field):
			t.Errorf("%s: %v, want an error naming %s", data, err, field)
		}
	}
}
