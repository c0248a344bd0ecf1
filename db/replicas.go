package db

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// What replicas of svc server on one PostgreSQL database share beyond tables (docs/DEPLOY.md):
// one of them at a time runs background work, and each is woken when another commits a
// change. On SQLite there is one process: it always leads and needs no waking.

// LeaderRetry is how often a replica that does not lead tries to take over, and how often the leader
// checks that it still holds the lock: another replica takes over within about this long (plus the
// time PostgreSQL takes to notice that a dead leader's connection closed, immediate when its process
// died and its host's kernel closed the socket).
var LeaderRetry = time.Second

// RunAsLeader runs fn while this process leads, until ctx ends. On PostgreSQL leading is holding
// LeaderLockKey, a session advisory lock, on a connection kept for the purpose: when this process dies
// the connection closes and PostgreSQL releases the lock, and another replica's next try takes it. When
// this process loses its connection (PostgreSQL restarted, the network failed) fn's context is
// cancelled and RunAsLeader tries again. On SQLite fn simply runs.
func RunAsLeader(ctx context.Context, sqldb *sql.DB, log *slog.Logger, fn func(ctx context.Context)) {
	if EngineOf(sqldb) != Postgres {
		fn(ctx)
		return
	}
	for ctx.Err() == nil {
		lead(ctx, sqldb, log, fn)
		select {
		case <-ctx.Done():
		case <-time.After(LeaderRetry/2 + rand.N(LeaderRetry/2+1)):
		}
	}
}

// lead takes the lock if it is free and, when it got it, runs fn until the lock is lost or ctx ends.
func lead(ctx context.Context, sqldb *sql.DB, log *slog.Logger, fn func(ctx context.Context)) {
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", LeaderLockKey).Scan(&got); err != nil || !got {
		conn.Close()
		return
	}
	log.Info("this replica leads: it runs the background work (sweeper)")
	fnCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(fnCtx)
	}()
	check := time.NewTicker(LeaderRetry)
	defer check.Stop()
	held := true
	for held && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-done:
			held = false // fn returned by itself; give the lead up
		case <-check.C:
			pctx, cancel := context.WithTimeout(ctx, LeaderRetry)
			err := conn.PingContext(pctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				log.Warn("this replica lost its connection to PostgreSQL and stops leading", "err", err)
				held = false
			}
		}
	}
	stop()
	<-done
	// The lock goes with the connection: closing it for good (not back to the pool) releases it at once
	// if it is alive, and PostgreSQL releases it anyway when it notices a dead one.
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	conn.Close()
	if ctx.Err() == nil {
		log.Info("this replica no longer leads")
	}
}

// EdgeChangesChannel is the PostgreSQL notification channel the edge_changes trigger notifies
// (db/migrations/postgres/005_edges.sql).
const EdgeChangesChannel = "svc_edge_changes"

// Listen returns a channel that receives a value soon after each commit that notifies channel on
// PostgreSQL, and once after each (re)connection (notifications sent while disconnected are lost: the
// receiver should read what it follows then). Values are coalesced: one waiting value stands for any
// number of notifications. The connection is kept until ctx ends, and reopened when it breaks. On
// SQLite the channel never receives.
func Listen(ctx context.Context, sqldb *sql.DB, log *slog.Logger, channel string) <-chan struct{} {
	wake := make(chan struct{}, 1)
	if EngineOf(sqldb) != Postgres {
		return wake
	}
	signal := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	go func() {
		pause := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := listen(ctx, sqldb, channel, signal)
			if ctx.Err() != nil {
				return
			}
			log.Warn("listening for PostgreSQL notifications failed; retrying", "channel", channel, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
			pause = min(2*pause, 5*time.Second)
		}
	}()
	return wake
}

func listen(ctx context.Context, sqldb *sql.DB, channel string, signal func()) error {
	conn, err := sqldb.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	var lerr error
	// The connection LISTENs until it breaks: it never goes back to the pool (ErrBadConn closes it).
	_ = conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, lerr = pc.Exec(ctx, "LISTEN "+channel); lerr != nil {
			return driver.ErrBadConn
		}
		signal()
		for {
			if _, lerr = pc.WaitForNotification(ctx); lerr != nil {
				return driver.ErrBadConn
			}
			signal()
		}
	})
	if lerr == nil {
		lerr = errors.New("the connection ended")
	}
	return lerr
}
