package core

import (
	"fmt"
	"strings"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"
)

func TestValidateSlug(t *testing.T) {
	cases := map[string]string{
		"ab": "", "a1": "", "my-model-v2": "", strings.Repeat("z", 50): "",
		"a": edgemodel.CodeInvalidSlug, strings.Repeat("z", 51): edgemodel.CodeInvalidSlug, "Ab": edgemodel.CodeInvalidSlug,
		"-ab": edgemodel.CodeInvalidSlug, "ab-": edgemodel.CodeInvalidSlug, "a_b": edgemodel.CodeInvalidSlug, "a.b": edgemodel.CodeInvalidSlug,
		"ünï": edgemodel.CodeInvalidSlug, "www": edgemodel.CodeReservedSlug, "api": edgemodel.CodeReservedSlug, "app": edgemodel.CodeReservedSlug,
		"admin": edgemodel.CodeReservedSlug, "dashboard": edgemodel.CodeReservedSlug, "docs": edgemodel.CodeReservedSlug, "status": edgemodel.CodeReservedSlug,
	}
	for slug, want := range cases {
		if got := edgemodel.CodeOf(ValidateSlug(slug)); got != want {
			t.Errorf("ValidateSlug(%q) = %q, want %q", slug, got, want)
		}
	}
}

func TestValidateLabel(t *testing.T) {
	cases := map[string]bool{
		"x": true, strings.Repeat("x", 80): true, strings.Repeat("日", 80): true, "CI key (prod)": true,
		"": false, " ": false, strings.Repeat("x", 81): false, "new\nline": false, "\x00": false, "\xff": false,
	}
	for label, ok := range cases {
		if err := ValidateLabel(label); (err == nil) != ok {
			t.Errorf("ValidateLabel(%q) = %v, want ok=%v", label, err, ok)
		}
	}
}

func TestResolveRetention(t *testing.T) {
	cur := &edgemodel.Retention{Mode: "unlimited", Days: 30}
	str := func(s string) *string { return &s }
	num := func(n int) *int { return &n }
	cases := []struct {
		mode    *string
		days    *int
		current *edgemodel.Retention
		want    edgemodel.Retention
		err     bool
	}{
		{nil, nil, nil, edgemodel.Retention{Mode: "days", Days: 7}, false},
		{str("days"), num(1), nil, edgemodel.Retention{Mode: "days", Days: 1}, false},
		{str("days"), num(365), nil, edgemodel.Retention{Mode: "days", Days: 365}, false},
		{str("none"), nil, nil, edgemodel.Retention{Mode: "none", Days: 7}, false},
		{str("days"), nil, cur, edgemodel.Retention{Mode: "days", Days: 30}, false}, // switching back restores the kept days
		{nil, num(90), cur, edgemodel.Retention{Mode: "unlimited", Days: 90}, false},
		{str("days"), num(366), nil, edgemodel.Retention{}, true},
		{str("days"), num(0), nil, edgemodel.Retention{}, true}, // an explicit 0 is an error, never the default
		{nil, num(0), cur, edgemodel.Retention{}, true},
		{str("days"), num(-3), nil, edgemodel.Retention{}, true},
		{str("weekly"), nil, nil, edgemodel.Retention{}, true},
		{str(""), nil, nil, edgemodel.Retention{}, true},
	}
	show := func(m *string, d *int) string {
		out := "mode=<absent>"
		if m != nil {
			out = fmt.Sprintf("mode=%q", *m)
		}
		if d != nil {
			return out + fmt.Sprintf(" days=%d", *d)
		}
		return out + " days=<absent>"
	}
	for _, tc := range cases {
		got, err := ResolveRetention(tc.mode, tc.days, tc.current)
		if tc.err {
			if edgemodel.CodeOf(err) != edgemodel.CodeInvalidRetention {
				t.Errorf("ResolveRetention(%s) = %v, want invalid_retention", show(tc.mode, tc.days), err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveRetention(%s, %v) = %v, %v; want %v", show(tc.mode, tc.days), tc.current, got, err, tc.want)
		}
	}
}

func TestSecrets(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 1000; i++ {
		k := NewKeyPlaintext()
		if !strings.HasPrefix(k, KeyPrefix) || len(k) != len(KeyPrefix)+43 || seen[k] {
			t.Fatalf("bad or repeated key %q", k)
		}
		seen[k] = true
		if strings.Trim(k[len(KeyPrefix):], base62) != "" {
			t.Fatalf("key %q has characters outside base62", k)
		}
	}
	if HashSecret("a") == HashSecret("b") {
		t.Fatal("distinct secrets hash alike")
	}
	if id := NewUUID(); !uuidPattern.MatchString(id) || id[14] != '4' {
		t.Fatalf("NewUUID() = %q", id)
	}
}
