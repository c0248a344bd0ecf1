package views

import (
	"strings"
	"testing"
)

// Key labels of up to 80 characters made from a common prefix stay apart where they are cut: the
// start and the end are kept, the middle cut with an ellipsis; short labels are whole.
func TestShortLabelKeepsWhereLabelsDiffer(t *testing.T) {
	a := "customer-support-assistant-production-eu-west-1-rotation-2026-11-primary-key-A"
	b := a[:len(a)-1] + "B"
	sa, sb := ShortLabel(a), ShortLabel(b)
	if sa == sb || len([]rune(sa)) != 40 || !strings.HasSuffix(sa, "key-A") || !strings.HasPrefix(sa, "customer-support") || !strings.Contains(sa, "…") {
		t.Errorf("ShortLabel(%q) = %q, of %q = %q", a, sa, b, sb)
	}
	if got := ShortLabel("laptop"); got != "laptop" {
		t.Errorf("a short label: %q", got)
	}
	if got := ShortLabel(strings.Repeat("é", 40)); got != strings.Repeat("é", 40) {
		t.Errorf("40 runes: %q", got)
	}
}
