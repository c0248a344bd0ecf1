package core

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/internal/edgemodel"
	"github.com/svcdev/svc/internal/ratelimit"
)

// Token budgets (docs/API.md, "Budgets"): a deployment or a key may carry {tokens, period}; the edge
// enforces them (internal/ratelimit's Budgets), the API shows what the current period has used from the
// recorded usage (usage_hourly, a few seconds behind the edges).

// MaxBudgetTokens bounds a budget so that a typo of extra zeros is caught rather than stored.
const MaxBudgetTokens = 1_000_000_000_000

// BudgetChange changes a budget in an update: the zero value leaves it, Set with a nil Value removes
// it, Set with a Value sets it.
type BudgetChange struct {
	Set   bool
	Value *edgemodel.Budget
}

// BudgetUsage is a budget with what its current period has used (prompt plus completion tokens, as
// recorded) and when the period ends.
type BudgetUsage struct {
	edgemodel.Budget
	Used     int64
	ResetsAt time.Time
}

// ValidateBudget checks a budget: 1 to MaxBudgetTokens tokens per day or month.
func ValidateBudget(b edgemodel.Budget) error {
	if b.Tokens < 1 || b.Tokens > MaxBudgetTokens {
		return errorf(edgemodel.CodeInvalidRequest, "budget.tokens must be a whole number from 1 to %d (got %d)", int64(MaxBudgetTokens), b.Tokens)
	}
	if b.Period != ratelimit.PeriodDay && b.Period != ratelimit.PeriodMonth {
		return errorf(edgemodel.CodeInvalidRequest, "budget.period must be %q or %q (UTC), got %q", ratelimit.PeriodDay, ratelimit.PeriodMonth, b.Period)
	}
	return nil
}

// RateBudget is the edge's counting form of a stored budget (the zero Budget: none).
func RateBudget(b *edgemodel.Budget) ratelimit.Budget {
	if b == nil {
		return ratelimit.Budget{}
	}
	return ratelimit.Budget{Tokens: b.Tokens, Period: b.Period}
}

func budgetOf(tokens sql.NullInt64, period sql.NullString) *edgemodel.Budget {
	if !tokens.Valid || !period.Valid {
		return nil
	}
	return &edgemodel.Budget{Tokens: tokens.Int64, Period: period.String}
}

func budgetColumns(b *edgemodel.Budget) (sql.NullInt64, sql.NullString) {
	if b == nil {
		return sql.NullInt64{}, sql.NullString{}
	}
	return sql.NullInt64{Int64: b.Tokens, Valid: true}, sql.NullString{String: b.Period, Valid: true}
}

// checkBudgetChange validates a change before anything is written.
func checkBudgetChange(c BudgetChange) error {
	if c.Set && c.Value != nil {
		return ValidateBudget(*c.Value)
	}
	return nil
}

// setDeploymentBudget applies a change of a deployment's budget inside the caller's transaction.
func (s *Service) setDeploymentBudget(ctx context.Context, tx dbsqlc.DBTX, id string, c BudgetChange) error {
	return applyBudget(c, "deployment", func(t sql.NullInt64, p sql.NullString) error {
		return s.q.DeploymentBudgetSet(ctx, tx, dbsqlc.DeploymentBudgetSetParams{BudgetTokens: t, BudgetPeriod: p, UpdatedAt: ms(s.now()), ID: id})
	})
}

// setKeyBudget applies a change of a key's budget inside the caller's transaction.
func (s *Service) setKeyBudget(ctx context.Context, tx dbsqlc.DBTX, id string, c BudgetChange) error {
	return applyBudget(c, "key", func(t sql.NullInt64, p sql.NullString) error {
		return s.q.KeyBudgetSet(ctx, tx, dbsqlc.KeyBudgetSetParams{BudgetTokens: t, BudgetPeriod: p, ID: id})
	})
}

// applyBudget checks a budget change and writes its columns through write; nothing when c changes nothing.
func applyBudget(c BudgetChange, of string, write func(sql.NullInt64, sql.NullString) error) error {
	if !c.Set {
		return nil
	}
	if err := checkBudgetChange(c); err != nil {
		return err
	}
	if err := write(budgetColumns(c.Value)); err != nil {
		return fmt.Errorf("set %s budget: %w", of, err)
	}
	return nil
}

// budgetUsage is b with its period's bounds, Used not yet filled (nil for no budget).
func (s *Service) budgetUsage(b *edgemodel.Budget) (*BudgetUsage, time.Time) {
	if b == nil {
		return nil, time.Time{}
	}
	start, end := RateBudget(b).Bounds(s.now())
	return &BudgetUsage{Budget: *b, ResetsAt: end}, start
}

// deploymentBudgetUsage fills a deployment's budget usage from the recorded usage of its callers: a
// page of one (deploymentsBudgetUsage), so that a deployment read alone and in a list count alike.
func (s *Service) deploymentBudgetUsage(ctx context.Context, d *Deployment, b *edgemodel.Budget) error {
	one := []Deployment{*d}
	if err := s.deploymentsBudgetUsage(ctx, one, []*edgemodel.Budget{b}); err != nil {
		return err
	}
	d.Budget = one[0].Budget
	return nil
}

// budgetPeriod is a budget's period by its two bounds: a day and a month that start together (on
// the 1st) end apart, so the usage read for one is not the other's.
type budgetPeriod struct{ start, end time.Time }

// deploymentsBudgetUsage fills the budget usage of a page of deployments (budgets[i] is ds[i]'s) from
// the recorded usage of their callers, with one read per budget period the page's budgets use rather
// than one per deployment.
func (s *Service) deploymentsBudgetUsage(ctx context.Context, ds []Deployment, budgets []*edgemodel.Budget) error {
	of := make([]budgetPeriod, len(ds))
	ids := map[budgetPeriod][]string{}
	for i, b := range budgets {
		u, start := s.budgetUsage(b)
		if u == nil {
			continue
		}
		of[i] = budgetPeriod{start, u.ResetsAt}
		ids[of[i]] = append(ids[of[i]], ds[i].ID)
		ds[i].Budget = u
	}
	used := map[budgetPeriod]map[string]int64{}
	for p, list := range ids {
		rows, err := s.q.UsageTotalsByDeployment(ctx, s.db, dbsqlc.UsageTotalsByDeploymentParams{Ids: jsonIDs(list), FromHour: ms(p.start), ToHour: ms(p.end)})
		if err != nil {
			return err
		}
		byID := make(map[string]int64, len(rows))
		for _, r := range rows {
			byID[r.DeploymentID] = r.PromptTokens + r.CompletionTokens
		}
		used[p] = byID
	}
	for i := range ds {
		if ds[i].Budget != nil {
			ds[i].Budget.Used = used[of[i]][ds[i].ID]
		}
	}
	return nil
}

// jsonIDs is a list of ids as the queries that take one read it: a JSON array, one text parameter
// that both engines take apart (json_each, jsonb_array_elements_text).
func jsonIDs(ids []string) string {
	b, _ := json.Marshal(ids) // a []string always encodes
	return string(b)
}

// BudgetUsed returns the tokens a budget's period [start, end) used, as recorded: a deployment's
// callers' (svc's copies left out) or a key's own. It seeds the edge's counts in svc server
// (ratelimit.Budgets.Seed), so that a restart does not start a period at 0; 0 when the store does not
// answer (the edge keeps serving).
func (s *Service) BudgetUsed(ctx context.Context, scope, deploymentID, id string, start, end time.Time) int64 {
	keyID := ""
	if scope == "key" {
		keyID = id
	}
	used, err := s.tokensUsed(ctx, deploymentID, keyID, start, end)
	if err != nil {
		s.log.Warn("budgets: the recorded usage could not be read; the period is counted from 0 in this process", "err", err)
		return 0
	}
	return used
}

// tokensUsed sums the prompt and completion tokens recorded in [start, end) for a deployment's callers,
// or for one of its keys when keyID is not "".
func (s *Service) tokensUsed(ctx context.Context, deploymentID, keyID string, start, end time.Time) (int64, error) {
	var used int64
	if keyID != "" {
		rows, err := s.q.UsageListByKey(ctx, s.db, dbsqlc.UsageListByKeyParams{DeploymentID: deploymentID, KeyID: keyID, FromHour: ms(start), ToHour: ms(end)})
		for _, r := range rows {
			used += r.PromptTokens + r.CompletionTokens
		}
		return used, err
	}
	// The query a page of deployments' budgets reads (deploymentsBudgetUsage), for one.
	rows, err := s.q.UsageTotalsByDeployment(ctx, s.db, dbsqlc.UsageTotalsByDeploymentParams{Ids: jsonIDs([]string{deploymentID}), FromHour: ms(start), ToHour: ms(end)})
	for _, r := range rows {
		used += r.PromptTokens + r.CompletionTokens
	}
	return used, err
}

// keysBudgetUsage fills the budget usage of a deployment's keys from their recorded usage: one read per
// period the keys' budgets use.
func (s *Service) keysBudgetUsage(ctx context.Context, q dbsqlc.DBTX, deploymentID string, keys []Key, budgets []*edgemodel.Budget) error {
	used := map[budgetPeriod]map[string]int64{}
	for i, b := range budgets {
		u, start := s.budgetUsage(b)
		if u == nil {
			continue
		}
		p := budgetPeriod{start, u.ResetsAt}
		byKey, ok := used[p]
		if !ok {
			rows, err := s.q.UsageTotalsByKey(ctx, q, dbsqlc.UsageTotalsByKeyParams{DeploymentID: deploymentID, FromHour: ms(start), ToHour: ms(u.ResetsAt)})
			if err != nil {
				return err
			}
			byKey = map[string]int64{}
			for _, r := range rows {
				byKey[r.KeyID] = r.PromptTokens + r.CompletionTokens
			}
			used[p] = byKey
		}
		u.Used = byKey[keys[i].ID]
		keys[i].Budget = u
	}
	return nil
}
