package cloudapi

import "testing"

func TestParseTarget(t *testing.T) {
	final := Target{Kind: TargetFinalAdapter, JobID: "job-a"}
	ckpt := Target{Kind: TargetCheckpoint, JobID: "job-a", Step: 100}
	base := Target{Kind: TargetBaseModel, Model: "m"}
	cases := []struct {
		in      string
		current Target
		want    Target
		wantErr bool
	}{
		{"final", ckpt, Target{Kind: TargetFinalAdapter, JobID: "job-a"}, false},
		{"final", final, final, false},
		{"final", base, Target{}, true},     // no current job to take
		{"final", Target{}, Target{}, true}, // creation: nothing current
		{"final:job-b", base, Target{Kind: TargetFinalAdapter, JobID: "job-b"}, false},
		{"final:", final, Target{}, true},
		{"checkpoint:300", final, Target{Kind: TargetCheckpoint, JobID: "job-a", Step: 300}, false},
		{"checkpoint:300", ckpt, Target{Kind: TargetCheckpoint, JobID: "job-a", Step: 300}, false},
		{"checkpoint:300", Target{Kind: TargetMultiModel}, Target{}, true},
		{"checkpoint:job-b:20", base, Target{Kind: TargetCheckpoint, JobID: "job-b", Step: 20}, false},
		{"checkpoint", final, Target{}, true},
		{"checkpoint:abc", final, Target{}, true},
		{"checkpoint:0", final, Target{}, true}, // step 0 cannot travel: omitempty
		{"checkpoint:-5", final, Target{}, true},
		{"checkpoint:job-b:", final, Target{}, true},
		{"checkpoint::5", final, Target{}, true},
		{"base:llama-3.1-8b-instruct", final, Target{Kind: TargetBaseModel, Model: "llama-3.1-8b-instruct"}, false},
		{"base:llama3:8b", Target{}, Target{Kind: TargetBaseModel, Model: "llama3:8b"}, false},
		{"base:", Target{}, Target{}, true},
		{"base", Target{}, Target{}, true},
		{"multi", final, Target{Kind: TargetMultiModel}, false},
		{" multi ", Target{}, Target{Kind: TargetMultiModel}, false},
		{"multi:x", Target{}, Target{}, true},
		{"", final, Target{}, true},
		{"adapter", final, Target{}, true},
		{"FINAL", final, Target{}, true},
	}
	for _, tc := range cases {
		got, err := ParseTarget(tc.in, tc.current)
		if tc.wantErr {
			if err == nil {
				t.Errorf("ParseTarget(%q, %+v) = %+v, want an error", tc.in, tc.current, got)
				continue
			}
			if e := asError(t, err); e.Code != "invalid_target" || e.Status != 400 {
				t.Errorf("ParseTarget(%q): error %+v, want invalid_target 400", tc.in, e)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q, %+v) = %+v, %v; want %+v", tc.in, tc.current, got, err, tc.want)
		}
	}
}

func TestShorthandRoundTrips(t *testing.T) {
	for _, tgt := range []Target{
		{Kind: TargetFinalAdapter, JobID: "job-a"},
		{Kind: TargetCheckpoint, JobID: "job-a", Step: 7},
		{Kind: TargetBaseModel, Model: "llama3:8b"},
		{Kind: TargetMultiModel},
	} {
		got, err := ParseTarget(tgt.Shorthand(), Target{})
		if err != nil || got != tgt {
			t.Errorf("%q parsed back to %+v, %v; want %+v", tgt.Shorthand(), got, err, tgt)
		}
	}
}

func TestSummaryMatchesSpec(t *testing.T) {
	cases := map[string]Target{
		"Final adapter (job 1a2b3c4d)":       {Kind: TargetFinalAdapter, JobID: "1a2b3c4d-0000-4000-8000-000000000000"},
		"Checkpoint step 300 (job 1a2b3c4d)": {Kind: TargetCheckpoint, JobID: "1a2b3c4d-0000-4000-8000-000000000000", Step: 300},
		"Base model: llama-3.1-8b-instruct":  {Kind: TargetBaseModel, Model: "llama-3.1-8b-instruct"},
	}
	for want, tgt := range cases {
		if got := tgt.Summary(); got != want {
			t.Errorf("Summary(%+v) = %q, want %q", tgt, got, want)
		}
	}
}
