package views

import "testing"

func TestCount(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	if got := LimitText("60", ""); got != "60 req/min" {
		t.Errorf("LimitText = %q", got)
	}
	if got := LimitText("", ""); got != "Unlimited" {
		t.Errorf("LimitText = %q", got)
	}
}

// One call next to a thousand still shows as a bar; stacked bars sit on the one below.
func TestBarGeometry(t *testing.T) {
	if b := barAt(3, 0, 1, 1000); b.H != "1.00" || b.Y != "99.00" || b.X != "31" {
		t.Errorf("a tiny bar: %+v", b)
	}
	if b := barAt(0, 50, 50, 100); b.H != "50.00" || b.Y != "0.00" {
		t.Errorf("a stacked bar: %+v", b)
	}
}
