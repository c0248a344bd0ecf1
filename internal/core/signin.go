package core

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
)

// Sign-in rules and lifetimes (docs/API.md, "Signing in").
const (
	PasswordMinLen = 10
	// bcrypt reads only the first 72 bytes of a password; longer ones would be silently truncated.
	PasswordMaxBytes     = 72
	AccessTokenLifetime  = time.Hour
	RefreshTokenLifetime = 30 * 24 * time.Hour
	// RefreshTokenPrefix sets refresh tokens apart from access tokens for people and secret scanners.
	RefreshTokenPrefix = "svc_rt_"
)

// Token kinds of the tokens table.
const (
	tokenAccess  = "access"
	tokenRefresh = "refresh"
)

var (
	// ErrEmailTaken is returned by CreateUser for an email that already has a user.
	ErrEmailTaken = errors.New("a user with this email already exists")
	// ErrBadCredentials is returned by CheckPassword for an unknown email or a wrong password alike,
	// so that callers cannot tell which emails have accounts.
	ErrBadCredentials = errors.New("wrong email or password")
	// ErrInvalidGrant is returned by Refresh for a refresh token that is unknown, expired or already
	// used (rotated away).
	ErrInvalidGrant = errors.New("refresh token is invalid, expired or already used")
)

// dummyHash is compared against when the email is unknown, so that a wrong email costs the same
// bcrypt work as a wrong password and response times do not reveal which emails exist. It is made on
// first use: every CLI start would otherwise pay for it.
var dummyHash = sync.OnceValue(func() []byte {
	h, _ := bcrypt.GenerateFromPassword([]byte("not the password of anyone"), bcrypt.DefaultCost)
	return h
})

// TokenPair is what a sign-in or a refresh hands to the client.
type TokenPair struct {
	AccessToken  string
	RefreshToken string
	ExpiresIn    time.Duration // lifetime of the access token
}

// NormalizeEmail trims and lower-cases an email, so that "Ann@Example.com " and "ann@example.com" are
// one account.
func NormalizeEmail(email string) string { return strings.ToLower(strings.TrimSpace(email)) }

// ValidatePassword checks the password rules of `svc users add`.
func ValidatePassword(password string) error {
	switch {
	case utf8.RuneCountInString(password) < PasswordMinLen:
		return fmt.Errorf("password must be at least %d characters long", PasswordMinLen)
	case len(password) > PasswordMaxBytes:
		return fmt.Errorf("password must be at most %d bytes long (bcrypt ignores the rest)", PasswordMaxBytes)
	}
	return nil
}

// CreateUser adds a local user who signs in with email and password (run on the server host by
// `svc users add`). It returns the new identity id.
func (s *Service) CreateUser(ctx context.Context, email, password string) (string, error) {
	email = NormalizeEmail(email)
	if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email {
		return "", fmt.Errorf("%q is not an email address", email)
	}
	if err := ValidatePassword(password); err != nil {
		return "", err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hash password: %w", err)
	}
	id := newID("idn")
	err = db.Map(s.q.IdentityCreate(ctx, s.db, dbsqlc.IdentityCreateParams{
		ID: id, Kind: KindUser, CreatedAt: ms(s.now()),
		Email:        sql.NullString{String: email, Valid: true},
		PasswordHash: sql.NullString{String: string(hash), Valid: true},
	}))
	if db.UniqueOn(err, "identities.email") {
		return "", fmt.Errorf("%w: %s", ErrEmailTaken, email)
	}
	return id, err
}

// CheckPassword returns the identity id of the user with this email and password. bcrypt runs
// whether or not the email exists.
func (s *Service) CheckPassword(ctx context.Context, email, password string) (string, error) {
	row, err := s.q.IdentityGetByEmail(ctx, s.db, sql.NullString{String: NormalizeEmail(email), Valid: true})
	if err = db.Map(err); err != nil && !errors.Is(err, db.ErrNotFound) {
		return "", err
	}
	hash := dummyHash()
	known := err == nil && row.Kind == KindUser && row.PasswordHash.Valid
	if known {
		hash = []byte(row.PasswordHash.String)
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(password)) != nil || !known {
		return "", ErrBadCredentials
	}
	return row.ID, nil
}

// IdentityEmail returns the email of a user identity ("" for anonymous ones), for the sign-in page.
func (s *Service) IdentityEmail(ctx context.Context, identityID string) (string, error) {
	row, err := s.q.IdentityGet(ctx, s.db, identityID)
	if err != nil {
		return "", db.Map(err)
	}
	return row.Email.String, nil
}

// IssueTokenPair gives a signed-in user an access token (1 hour) and a refresh token (30 days).
func (s *Service) IssueTokenPair(ctx context.Context, identityID string) (*TokenPair, error) {
	var pair *TokenPair
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		var err error
		pair, err = s.issuePair(ctx, tx, identityID)
		return err
	})
	return pair, err
}

// Refresh trades a refresh token for a new pair. The old refresh token is deleted in the same
// transaction (rotation), so it works exactly once: a stolen copy used after the owner's refresh, or
// the owner's after the thief's, is refused.
func (s *Service) Refresh(ctx context.Context, refreshToken string) (*TokenPair, error) {
	hash := HashSecret(refreshToken)
	var pair *TokenPair
	err := db.Tx(ctx, s.db, func(tx *sql.Tx) error {
		row, err := s.q.TokenGetByHash(ctx, tx, hash[:])
		if err = db.Map(err); err != nil {
			if errors.Is(err, db.ErrNotFound) {
				return ErrInvalidGrant
			}
			return err
		}
		if !sameHash(row.Hash, hash) || row.Kind != tokenRefresh || row.IdentityKind != KindUser {
			return ErrInvalidGrant
		}
		if row.ExpiresAt.Valid && row.ExpiresAt.Int64 <= ms(s.now()) {
			return ErrInvalidGrant
		}
		if err := s.q.TokenDelete(ctx, tx, hash[:]); err != nil {
			return err
		}
		pair, err = s.issuePair(ctx, tx, row.IdentityID)
		return err
	})
	return pair, err
}

func (s *Service) issuePair(ctx context.Context, tx *sql.Tx, identityID string) (*TokenPair, error) {
	now := s.now()
	pair := &TokenPair{AccessToken: NewToken(), RefreshToken: RefreshTokenPrefix + randomBase62(43), ExpiresIn: AccessTokenLifetime}
	for _, t := range []struct {
		token, kind string
		life        time.Duration
	}{{pair.AccessToken, tokenAccess, AccessTokenLifetime}, {pair.RefreshToken, tokenRefresh, RefreshTokenLifetime}} {
		hash := HashSecret(t.token)
		err := s.q.TokenCreate(ctx, tx, dbsqlc.TokenCreateParams{
			Hash: hash[:], IdentityID: identityID, Kind: t.kind,
			ExpiresAt: sql.NullInt64{Int64: ms(now.Add(t.life)), Valid: true}, CreatedAt: ms(now),
		})
		if err != nil {
			return nil, db.Map(err)
		}
	}
	return pair, nil
}
