package sentence

import "testing"

func TestFrom(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// The API's wording, as the studio and the CLI show it.
		{`slug "taken" is already taken; choose another`, `Slug "taken" is already taken; choose another.`},
		{"anonymous users may keep at most 5 live endpoints; delete one, or sign in with `svc login` (which keeps the endpoints you made) to create more",
			"Anonymous users may keep at most 5 live endpoints; delete one, or sign in with svc login (which keeps the endpoints you made) to create more."},
		{"job 1234 has no checkpoint at step 7", "Job 1234 has no checkpoint at step 7."},
		// Identifiers keep their case; the sentence still ends.
		{"authMode must be fixed_api_key or none", "authMode must be fixed_api_key or none."},
		{"limits.requestsPerMinute must be a whole number (got 0)", "limits.requestsPerMinute must be a whole number (got 0)."},
		// Sentences already are; they stay as they are.
		{"Choose a base model.", "Choose a base model."},
		{"Is the server running?", "Is the server running?"},
		{"Is it running? (svc dev starts one.)", "Is it running? (svc dev starts one.)"},
		{`the job is "done"`, `The job is "done".`},
		{"  spaced out  ", "Spaced out."},
		{"", ""},
		{"é accentué", "É accentué."},
	} {
		if got := From(c.in); got != c.want {
			t.Errorf("From(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
