package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// limitFlags are --rpm and --tpm: a number sets a limit, "none" clears it, absent leaves it.
type limitFlags struct {
	rpm, tpm *string
}

func (c *command) limitFlags() limitFlags {
	return limitFlags{
		rpm: c.String("rpm", "", "requests per minute: a number, or none for unlimited"),
		tpm: c.String("tpm", "", "tokens (prompt + completion) per minute: a number, or none for unlimited"),
	}
}

// update returns the LimitsUpdate the flags ask for. A number outside the cloud's range
// (core.MaxRateLimit) is refused here, in the flags' own words; the cloud applies the rule again.
func (f limitFlags) update(cmd *command) (cloudapi.LimitsUpdate, error) {
	var u cloudapi.LimitsUpdate
	for _, fl := range []struct {
		name string
		v    string
		dst  *cloudapi.LimitChange
	}{{"rpm", *f.rpm, &u.RequestsPerMinute}, {"tpm", *f.tpm, &u.TokensPerMinute}} {
		switch v := strings.TrimSpace(fl.v); {
		case v == "":
		case strings.EqualFold(v, "none"):
			*fl.dst = cloudapi.NoLimit()
		default:
			n, err := strconv.Atoi(strings.ReplaceAll(v, ",", ""))
			if err != nil || n < 1 || n > core.MaxRateLimit {
				return u, cmd.fail("--%s must be a whole number from 1 to %s, or none for unlimited (got %q)", fl.name, thousands(core.MaxRateLimit), fl.v)
			}
			*fl.dst = cloudapi.LimitTo(n)
		}
	}
	return u, nil
}

// thousands writes n with thousands separators: 1,000,000,000.
func thousands(n int) string { return views.Count(int64(n)) }

// fmtLimits reads "60 req/min, 10000 tokens/min", "unlimited" when neither is set.
func fmtLimits(l cloudapi.Limits) string {
	var parts []string
	if l.RequestsPerMinute != nil {
		parts = append(parts, fmt.Sprintf("%d req/min", *l.RequestsPerMinute))
	}
	if l.TokensPerMinute != nil {
		parts = append(parts, fmt.Sprintf("%d tokens/min", *l.TokensPerMinute))
	}
	if len(parts) == 0 {
		return "unlimited"
	}
	return strings.Join(parts, ", ")
}

func runKeysUpdate(c *cli, args []string) error {
	cmd := c.newCommand("svc keys update DEPLOYMENT KEY [--rpm N|none] [--tpm N|none] [--budget-tokens N|none --budget-period day|month] [--weight N]",
		"Changes a key's rate limits, token budget and weight; what is not given keeps its value. A call must fit\n"+
			"both its key's limits and budget and its deployment's. DEPLOYMENT is its id or its slug; KEY is\n"+
			"the key's id.")
	limits := cmd.limitFlags()
	budget := cmd.budgetFlags()
	weight := cmd.Int("weight", 0, "its share of its model's turns against other keys, 1 to 100")
	pos, err := c.parse(cmd, args, 2, false)
	if err != nil {
		return err
	}
	u, err := limits.update(cmd)
	if err != nil {
		return err
	}
	b, err := budget.update(cmd)
	if err != nil {
		return err
	}
	var w *int
	if *weight != 0 {
		if *weight < 1 || *weight > core.MaxKeyWeight {
			return cmd.fail("--weight must be a whole number from 1 to %d (got %d)", core.MaxKeyWeight, *weight)
		}
		w = weight
	}
	if u.IsZero() && b.IsZero() && w == nil {
		return cmd.fail("nothing to update: give --rpm, --tpm, --budget-tokens or --weight")
	}
	cl, id, err := c.scopedDeployment(pos[0])
	if err != nil {
		return err
	}
	k, err := cl.UpdateDeploymentKey(c.ctx, id, pos[1], cloudapi.UpdateKeyRequest{Limits: u, Budget: b, Weight: w})
	if err != nil {
		return err
	}
	if c.asJSON {
		return c.printJSON(k)
	}
	fmt.Fprintf(c.stdout, "key %s (%s): %s; budget: %s; weight %d\n", k.ID, k.Label, fmtLimits(k.Limits), fmtBudget(k.Budget), k.Weight)
	return nil
}
