package jsonx

import (
	"reflect"
	"testing"
)

func TestMembersKeepsTheOrderWritten(t *testing.T) {
	names, m := Members([]byte(`{"b":1,"a":{"x":[1,2]},"c\u0041":"s","b":2}`))
	if want := []string{"b", "a", "cA"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("names %q, want %q", names, want)
	}
	if string(m["b"]) != "2" || string(m["a"]) != `{"x":[1,2]}` || string(m["cA"]) != `"s"` {
		t.Fatalf("values %q", m)
	}
	for _, notObject := range []string{`[1]`, `"x"`, ``, `{`} {
		if names, _ := Members([]byte(notObject)); len(names) != 0 {
			t.Errorf("%q: names %q", notObject, names)
		}
	}
}
