package cli

import (
	"database/sql"
	"fmt"
	"log/slog"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/core"
)

// The edge-tokens commands work on the control plane's database directly, like `svc users add`:
// they run where svc server's --data or --database reach and need no token (docs/DEPLOY.md, "Edge
// tokens").

// openData registers --data and --database on cmd, parses args (want positional ones) and opens the
// database.
func (c *cli) openData(cmd *command, args []string, want int) (*core.Service, []string, func(), error) {
	data := cmd.String("data", Env("data", "data"), "folder of the SQLite database, as given to svc server (env SVC_DATA)")
	database := DatabaseFlag(cmd.FlagSet)
	pos, err := c.parse(cmd, args, want, false)
	if err != nil {
		return nil, nil, nil, err
	}
	sqldb, err := db.OpenDatabase(c.ctx, *database, *data, slog.New(slog.NewTextHandler(c.stderr, nil)))
	if err != nil {
		return nil, nil, nil, err
	}
	return core.New(core.Options{DB: sqldb}), pos, func() { closeDB(sqldb) }, nil
}

func closeDB(sqldb *sql.DB) { _ = sqldb.Close() }

func runEdgeTokensCreate(c *cli, args []string) error {
	cmd := newLocalCommand("svc edge-tokens create NAME [--data DIR | --database URL]",
		"Makes an edge token for `svc edge` processes and prints it, once: only its hash is stored.\n"+
			"Give it to the edges in an environment variable (svc edge --edge-token-env NAME).")
	svc, pos, done, err := c.openData(cmd, args, 1)
	if err != nil {
		return err
	}
	defer done()
	tok, plaintext, err := svc.CreateEdgeToken(c.ctx, pos[0])
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "Edge token %q (%s…) created. It is shown once; store it as a secret:\n", tok.Name, tok.Prefix)
	fmt.Fprintln(c.stdout, plaintext)
	return nil
}

func runEdgeTokensList(c *cli, args []string) error {
	cmd := newLocalCommand("svc edge-tokens list [--data DIR | --database URL] [--json]", "Lists the edge tokens, revoked ones included, with when each was last used.")
	cmd.BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	svc, _, done, err := c.openData(cmd, args, 0)
	if err != nil {
		return err
	}
	defer done()
	toks, err := svc.ListEdgeTokens(c.ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		type row struct {
			Name       string  `json:"name"`
			Prefix     string  `json:"prefix"`
			CreatedAt  string  `json:"createdAt"`
			LastUsedAt *string `json:"lastUsedAt"`
			RevokedAt  *string `json:"revokedAt"`
		}
		out := make([]row, len(toks))
		for i, t := range toks {
			out[i] = row{Name: t.Name, Prefix: t.Prefix, CreatedAt: t.CreatedAt.Format("2006-01-02T15:04:05Z07:00")}
			if t.LastUsedAt != nil {
				s := t.LastUsedAt.Format("2006-01-02T15:04:05Z07:00")
				out[i].LastUsedAt = &s
			}
			if t.RevokedAt != nil {
				s := t.RevokedAt.Format("2006-01-02T15:04:05Z07:00")
				out[i].RevokedAt = &s
			}
		}
		return c.printJSON(map[string]any{"edgeTokens": out})
	}
	rows := [][]string{{"NAME", "PREFIX", "CREATED", "LAST USED", "REVOKED"}}
	for _, t := range toks {
		rows = append(rows, []string{t.Name, t.Prefix + "…", fmtTime(t.CreatedAt), fmtTimePtr(t.LastUsedAt), fmtTimePtr(t.RevokedAt)})
	}
	return c.table(rows)
}

func runEdgeTokensRevoke(c *cli, args []string) error {
	cmd := newLocalCommand("svc edge-tokens revoke NAME [--data DIR | --database URL]",
		"Revokes the live edge token with this name: edges using it are refused from their next call\n"+
			"to the control plane on, and keep serving what they cached for --max-stale.")
	svc, pos, done, err := c.openData(cmd, args, 1)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.RevokeEdgeToken(c.ctx, pos[0]); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Edge token %q revoked.\n", pos[0])
	return nil
}
