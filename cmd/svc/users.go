package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"

	"github.com/svcdev/svc/core"
	"github.com/svcdev/svc/db"
)

const usersUsage = `svc users: accounts of this server (run on the server host)

Usage:
  svc users add EMAIL [--data DIR] [--password-stdin]

Run "svc users add --help" for the flags.
`

// runUsers manages the server's local users. It works on the data folder directly, like
// `svc server`, so it runs on the server host and needs no token.
func runUsers(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "add" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, usersUsage)
			return nil
		}
		fmt.Fprint(stderr, usersUsage)
		return errors.New("missing or unknown command; svc users has add")
	}
	fs := newFlagSet("users add EMAIL", "Adds a user who signs in with `svc login`. The password is read from the terminal\n(without echo) or, with --password-stdin, as the first line of standard input.", stderr)
	data := fs.String("data", env("data", "data"), "folder of the SQLite database, as given to svc server (env SVC_DATA)")
	fromStdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input (for scripts)")
	// Flags may come before or after the email.
	var email string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		if email != "" {
			return fmt.Errorf("unexpected argument %q", fs.Arg(0))
		}
		email, rest = fs.Arg(0), fs.Args()[1:]
	}
	if email == "" {
		fs.Usage()
		return errors.New("missing EMAIL")
	}
	password, err := readPassword(stdin, stderr, *fromStdin)
	if err != nil {
		return err
	}
	if err := core.ValidatePassword(password); err != nil {
		return err
	}
	sqldb, err := db.Open(ctx, *data, logger(stderr))
	if err != nil {
		return err
	}
	defer sqldb.Close()
	id, err := core.New(core.Options{DB: sqldb}).CreateUser(ctx, email, password)
	if errors.Is(err, core.ErrEmailTaken) {
		return fmt.Errorf("a user with email %s already exists in %s", core.NormalizeEmail(email), *data)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Added user %s (%s) to %s.\nThey sign in with: svc login --api <this server's base URL>\n", core.NormalizeEmail(email), id, *data)
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
		return "", errors.New("standard input is not a terminal: pass the password with --password-stdin")
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
