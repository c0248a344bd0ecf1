package cloudapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// targetForms lists the shorthands for error messages.
const targetForms = "final, final:<jobId>, checkpoint:<step>, checkpoint:<jobId>:<step>, base:<model> or multi"

// ParseTarget reads the re-target shorthand (docs/API.md, "SDK (Go)"):
//
//	final                      final adapter of the current target's job
//	final:<jobId>              final adapter of another job
//	checkpoint:<step>          checkpoint of the current target's job
//	checkpoint:<jobId>:<step>  checkpoint of another job
//	base:<model>               base model only
//	multi                      every public model
//
// current is the deployment's target before the change; it matters only for the forms without a
// job id, and may be the zero Target when there is none (creation). Errors are *Error with code
// invalid_target, the code the server would give, so callers handle both the same way.
func ParseTarget(shorthand string, current Target) (Target, error) {
	s := strings.TrimSpace(shorthand)
	kind, rest, hasRest := strings.Cut(s, ":")
	switch kind {
	case "multi":
		if hasRest {
			return Target{}, invalidTarget("%q: multi takes no argument", s)
		}
		return Target{Kind: TargetMultiModel}, nil

	case "base":
		model := strings.TrimSpace(rest)
		if model == "" {
			return Target{}, invalidTarget("%q: write base:<model>, e.g. base:llama-3.1-8b-instruct", s)
		}
		// Model ids may contain colons (Ollama's "llama3:8b"), so everything after the first one is
		// the model.
		return Target{Kind: TargetBaseModel, Model: model}, nil

	case "final":
		if !hasRest {
			job, err := currentJob(s, current)
			if err != nil {
				return Target{}, err
			}
			return Target{Kind: TargetFinalAdapter, JobID: job}, nil
		}
		job := strings.TrimSpace(rest)
		if job == "" || strings.Contains(job, ":") {
			return Target{}, invalidTarget("%q: write final or final:<jobId>", s)
		}
		return Target{Kind: TargetFinalAdapter, JobID: job}, nil

	case "checkpoint":
		if !hasRest {
			return Target{}, invalidTarget("%q: write checkpoint:<step> or checkpoint:<jobId>:<step>", s)
		}
		job, stepText, named := strings.Cut(rest, ":")
		if !named {
			stepText = job
			j, err := currentJob(s, current)
			if err != nil {
				return Target{}, err
			}
			job = j
		}
		job = strings.TrimSpace(job)
		if job == "" {
			return Target{}, invalidTarget("%q: the job id is empty", s)
		}
		step, err := strconv.ParseInt(strings.TrimSpace(stepText), 10, 64)
		// Step 0 cannot be sent: Target.Step is omitted from JSON when zero.
		if err != nil || step < 1 {
			return Target{}, invalidTarget("%q: the step must be a positive whole number", s)
		}
		return Target{Kind: TargetCheckpoint, JobID: job, Step: step}, nil
	}
	return Target{}, invalidTarget("unknown target %q: use %s", s, targetForms)
}

// currentJob is the job of the current target, for the shorthands that do not name one.
func currentJob(s string, current Target) (string, error) {
	if (current.Kind == TargetFinalAdapter || current.Kind == TargetCheckpoint) && current.JobID != "" {
		return current.JobID, nil
	}
	return "", invalidTarget("%q needs a current job, but the current target is %s: name the job, e.g. final:<jobId> or checkpoint:<jobId>:<step>",
		s, current.Summary())
}

func invalidTarget(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_target", Message: fmt.Sprintf(format, args...)}
}

// Shorthand is the inverse of ParseTarget, always in the explicit form that names the job:
// final:<jobId>, checkpoint:<jobId>:<step>, base:<model> or multi.
func (t Target) Shorthand() string {
	switch t.Kind {
	case TargetFinalAdapter:
		return "final:" + t.JobID
	case TargetCheckpoint:
		return fmt.Sprintf("checkpoint:%s:%d", t.JobID, t.Step)
	case TargetBaseModel:
		return "base:" + t.Model
	case TargetMultiModel:
		return "multi"
	}
	return t.Kind
}

// Summary is the one-line description the studio list shows, e.g.
// "Final adapter (job 1a2b3c4d)" or "Base model: llama-3.1-8b-instruct".
func (t Target) Summary() string {
	switch t.Kind {
	case TargetFinalAdapter:
		return fmt.Sprintf("Final adapter (job %s)", shortID(t.JobID))
	case TargetCheckpoint:
		return fmt.Sprintf("Checkpoint step %d (job %s)", t.Step, shortID(t.JobID))
	case TargetBaseModel:
		return "Base model: " + t.Model
	case TargetMultiModel:
		return "All public models"
	case "":
		return "none"
	}
	return t.Kind
}

// shortID is the first 8 characters of a job UUID, as the studio list shows it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
