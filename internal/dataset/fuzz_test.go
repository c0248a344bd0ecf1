package dataset

import (
	"testing"
)

// FuzzChatLine: whatever a stored run holds, the conversion never panics, and a line it writes is one
// OpenAI's format takes (the validator, which reads the line as generic JSON, accepts it); so is a
// preference line it writes of the run and another one. The second run also answers any
// previous_response_id the first names.
func FuzzChatLine(f *testing.F) {
	for _, cases := range [][]convCase{chatCases, messagesCases, responsesCases} {
		for _, c := range cases {
			f.Add([]byte(c.req), []byte(c.res), []byte(c.req), []byte(c.res), true, c.opt.Reasoning)
		}
	}
	f.Add([]byte(`{"messages":[{"role":"user","content":"Hi"}]}`), []byte(cutChat), []byte(`{"input":"x"}`),
		[]byte(`{"object":"response","output":[]}`), false, false)
	f.Fuzz(func(t *testing.T, req, res, prevReq, prevRes []byte, ok, reasoning bool) {
		status := "ok"
		if !ok {
			status = "error"
		}
		other := Run{Status: "ok", Request: prevReq, Response: prevRes}
		opt := Options{Reasoning: reasoning, Cut: true, Previous: func(string) (Run, bool) { return other, true }}
		run := Run{Status: status, Request: req, Response: res}
		if line, err := ChatLine(run, opt); err == nil {
			if verr := ValidateChatLine(line); verr != nil {
				t.Fatalf("the validator refuses a line the conversion wrote: %v\n%s", verr, line)
			}
		} else if ReasonOf(err) == "" {
			t.Fatalf("an error without a reason: %v", err)
		}
		if line, err := PreferenceLine(run, other, opt); err == nil {
			if verr := ValidatePreferenceLine(line); verr != nil {
				t.Fatalf("the validator refuses a preference line the conversion wrote: %v\n%s", verr, line)
			}
		}
	})
}
