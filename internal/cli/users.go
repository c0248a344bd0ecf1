package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/internal/core"
)

// runUsersAdd adds one of the server's local users. It works on the data folder directly, like
// `svc server`, so it runs on the server host and needs no token.
func runUsersAdd(c *cli, args []string) error {
	cmd := newLocalCommand("svc users add EMAIL [--data DIR | --database URL] [--password-stdin]",
		"Adds a user who signs in with `svc login`. The password is read from the terminal\n"+
			"(without echo) or, with --password-stdin, as the first line of standard input.")
	data := cmd.String("data", Env("data", "data"), "folder of the SQLite database, as given to svc server (env SVC_DATA)")
	database := DatabaseFlag(cmd.FlagSet)
	fromStdin := cmd.Bool("password-stdin", false, "read the password from the first line of standard input (for scripts)")
	pos, err := c.parse(cmd, args, 1, false)
	if err != nil {
		return err
	}
	email := pos[0]
	password, err := readPassword(c.stdin, c.stderr, *fromStdin)
	if err != nil {
		return err
	}
	if err := core.ValidatePassword(password); err != nil {
		return err
	}
	sqldb, err := db.OpenDatabase(c.ctx, *database, *data, slog.New(slog.NewTextHandler(c.stderr, nil)))
	if err != nil {
		return err
	}
	defer sqldb.Close()
	id, err := core.New(core.Options{DB: sqldb}).CreateUser(c.ctx, email, password)
	if errors.Is(err, core.ErrEmailTaken) {
		return fmt.Errorf("a user with email %s already exists in %s", core.NormalizeEmail(email), where(*database, *data))
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "Added user %s (%s) to %s.\nThey sign in with: svc login --api <this server's base URL>\n", core.NormalizeEmail(email), id, where(*database, *data))
	return nil
}

// readPassword reads the new password: from the first line of stdin for scripts, else twice from
// the terminal without echo.
func readPassword(stdin io.Reader, prompt io.Writer, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("read the password from stdin: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	f, ok := stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", &UsageError{Msg: "standard input is not a terminal: pass the password with --password-stdin"}
	}
	fmt.Fprintf(prompt, "Password (at least %d characters): ", core.PasswordMinLen)
	first, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(prompt)
	if err != nil {
		return "", err
	}
	fmt.Fprint(prompt, "Password again: ")
	second, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(prompt)
	if err != nil {
		return "", err
	}
	if string(first) != string(second) {
		return "", errors.New("the two passwords differ")
	}
	return string(first), nil
}

// where names the database for messages: --database without its password, else the data folder.
func where(database, data string) string {
	if database != "" {
		return db.Describe(database)
	}
	return data
}
