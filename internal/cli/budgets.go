package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/svcdev/svc/cloudapi"
	"github.com/svcdev/svc/internal/core"
	"github.com/svcdev/svc/views"
)

// budgetFlags are --budget-tokens and --budget-period (docs/API.md, "Budgets"): a number of tokens and
// day or month set a budget, --budget-tokens none removes it, absent leaves it.
type budgetFlags struct {
	tokens, period *string
}

func (c *command) budgetFlags() budgetFlags {
	return budgetFlags{
		tokens: c.String("budget-tokens", "", "token budget (prompt + completion) per period: a number, or none to remove it"),
		period: c.String("budget-period", "", "the budget's period: day or month (UTC)"),
	}
}

// set returns the budget the flags ask for, nil when none is given or --budget-tokens none. The
// cloud applies the rule again (core.ValidateBudget).
func (f budgetFlags) set(cmd *command) (b *cloudapi.BudgetSet, removed bool, err error) {
	tokens, period := strings.TrimSpace(*f.tokens), strings.ToLower(strings.TrimSpace(*f.period))
	switch {
	case tokens == "" && period == "":
		return nil, false, nil
	case strings.EqualFold(tokens, "none"):
		if period != "" {
			return nil, false, cmd.fail("--budget-period goes with a number of --budget-tokens, not none")
		}
		return nil, true, nil
	case tokens == "":
		return nil, false, cmd.fail("--budget-period needs --budget-tokens N")
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(tokens, ",", ""), 10, 64)
	if err != nil || n < 1 || n > core.MaxBudgetTokens {
		return nil, false, cmd.fail("--budget-tokens must be a whole number from 1 to %s, or none to remove the budget (got %q)", thousands(core.MaxBudgetTokens), *f.tokens)
	}
	if period != "day" && period != "month" {
		return nil, false, cmd.fail("--budget-period must be day or month with --budget-tokens (got %q)", *f.period)
	}
	return &cloudapi.BudgetSet{Tokens: n, Period: period}, false, nil
}

// update returns the BudgetUpdate the flags ask for.
func (f budgetFlags) update(cmd *command) (cloudapi.BudgetUpdate, error) {
	b, removed, err := f.set(cmd)
	switch {
	case err != nil:
		return cloudapi.BudgetUpdate{}, err
	case removed:
		return cloudapi.NoBudget(), nil
	case b != nil:
		return cloudapi.SetBudget(b.Tokens, b.Period), nil
	}
	return cloudapi.BudgetUpdate{}, nil
}

// fmtBudget reads "1,200 of 10,000 tokens a day used (resets 2026-05-11 00:00 UTC)", "none" without one.
func fmtBudget(b *cloudapi.Budget) string {
	if b == nil {
		return "none"
	}
	return fmt.Sprintf("%s of %s tokens a %s used (resets %s)", views.Count(b.Used), views.Count(b.Tokens), b.Period,
		b.ResetsAt.UTC().Format("2006-01-02 15:04 UTC"))
}

// fmtUsedBudget is the USED/BUDGET cell of a listing: "1,200/10,000 day", "-" without a budget.
func fmtUsedBudget(b *cloudapi.Budget) string {
	if b == nil {
		return "-"
	}
	return views.Count(b.Used) + "/" + views.Count(b.Tokens) + " " + b.Period
}
