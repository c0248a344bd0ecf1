package core

import (
	"strings"
	"testing"
)

func TestValidateSlug(t *testing.T) {
	cases := map[string]string{
		"ab": "", "a1": "", "my-model-v2": "", strings.Repeat("z", 50): "",
		"a": CodeInvalidSlug, strings.Repeat("z", 51): CodeInvalidSlug, "Ab": CodeInvalidSlug,
		"-ab": CodeInvalidSlug, "ab-": CodeInvalidSlug, "a_b": CodeInvalidSlug, "a.b": CodeInvalidSlug,
		"ünï": CodeInvalidSlug, "www": CodeReservedSlug, "api": CodeReservedSlug, "app": CodeReservedSlug,
		"admin": CodeReservedSlug, "dashboard": CodeReservedSlug, "docs": CodeReservedSlug, "status": CodeReservedSlug,
	}
	for slug, want := range cases {
		if got := CodeOf(ValidateSlug(slug)); got != want {
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
	cur := &Retention{Mode: "unlimited", Days: 30}
	cases := []struct {
		mode    string
		days    int
		current *Retention
		want    Retention
		err     bool
	}{
		{"", 0, nil, Retention{"days", 7}, false},
		{"days", 1, nil, Retention{"days", 1}, false},
		{"days", 365, nil, Retention{"days", 365}, false},
		{"none", 0, nil, Retention{"none", 7}, false},
		{"days", 0, cur, Retention{"days", 30}, false}, // switching back restores the kept days
		{"", 90, cur, Retention{"unlimited", 90}, false},
		{"days", 366, nil, Retention{}, true},
		{"days", -3, nil, Retention{}, true},
		{"weekly", 0, nil, Retention{}, true},
	}
	for _, tc := range cases {
		got, err := ResolveRetention(tc.mode, tc.days, tc.current)
		if tc.err {
			if CodeOf(err) != CodeInvalidRetention {
				t.Errorf("ResolveRetention(%q, %d) = %v, want invalid_retention", tc.mode, tc.days, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveRetention(%q, %d, %v) = %v, %v; want %v", tc.mode, tc.days, tc.current, got, err, tc.want)
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
