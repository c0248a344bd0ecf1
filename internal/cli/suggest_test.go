package cli

import (
	"strings"
	"testing"
)

// A mistyped command, verb or flag is answered with the nearest one when one is near, and with no
// guess when none is (or two are as near).
func TestCLIDidYouMean(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	t.Chdir(t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"deployments", "lsit"}, `unknown command "svc deployments lsit"; did you mean "svc deployments list"?`},
		{[]string{"runs", "list", "dep", "--stauts", "ok"}, `did you mean --status?`},
		{[]string{"runs", "list", "dep", "--arms=canary"}, `did you mean --arm?`},
	} {
		_, _, _, err := runForTest(t, tc.args...)
		if err == nil || ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("svc %s: %v, want a usage error saying %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	if _, _, _, err := runForTest(t, "deployments", "frobnicate"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("no near command: %v", err)
	}
	if got := Suggest("deplyments", "server", "dev", "studio", "edge"); got != `; did you mean "svc deployments"?` {
		t.Errorf("Suggest(deplyments) = %q", got)
	}
	if got := Suggest("zzz", "server"); got != "" {
		t.Errorf("Suggest(zzz) = %q", got)
	}
	if got := nearest("de", []string{"dev", "deg"}); got != "" {
		t.Errorf("a tie guessed %q", got)
	}
}
