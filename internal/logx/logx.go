// Package logx keeps repeated failure lines from flooding the log: the first line of a kind is
// written as it is, the repeats that follow are counted, and one line per interval says how many
// there were (docs/OPERATIONS.md, "Logs").
package logx

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// DefaultEvery is the interval of the count lines.
const DefaultEvery = 10 * time.Second

// Limiter bounds the lines of repeated failures, kind by kind. A kind is a message and what tells
// its failures apart (a deployment, a status and an error code, say); lines of different kinds never
// hide each other. While a kind keeps failing, the log gets its first line, then one line per
// interval, "… 12,345 more in the last 10 s"; once an interval passes without it, its next failure is
// written in full again. Safe for concurrent use; the zero value is not: use New.
type Limiter struct {
	log   *slog.Logger
	every time.Duration

	mu    sync.Mutex
	kinds map[kindKey]*repeats
}

type kindKey struct{ msg, kind string }

// repeats is a kind that failed within the current interval.
type repeats struct {
	level slog.Level
	n     int // repeats since the last line
	timer *time.Timer
}

// New returns a Limiter writing to log, with count lines every interval (DefaultEvery when 0).
func New(log *slog.Logger, every time.Duration) *Limiter {
	if every <= 0 {
		every = DefaultEvery
	}
	return &Limiter{log: log, every: every, kinds: map[kindKey]*repeats{}}
}

// Log writes the line (msg and attrs, at level) when it is the first of its kind in the interval, and
// otherwise counts it for the interval's count line. kind tells failures with the same message apart;
// it is written on the count lines.
func (l *Limiter) Log(ctx context.Context, level slog.Level, msg, kind string, attrs ...slog.Attr) {
	if l.Allow(ctx, level, msg, kind) {
		l.log.LogAttrs(ctx, level, msg, attrs...)
	}
}

// Allow is Log for callers that build their line only when it is written: true means write it now
// (through the Limiter's logger, at level, with msg); false means it was counted, or is below the
// logger's level.
func (l *Limiter) Allow(ctx context.Context, level slog.Level, msg, kind string) bool {
	if !l.log.Enabled(ctx, level) {
		return false
	}
	key := kindKey{msg, kind}
	l.mu.Lock()
	defer l.mu.Unlock()
	if k := l.kinds[key]; k != nil {
		k.n++
		return false
	}
	k := &repeats{level: level}
	l.kinds[key] = k
	k.timer = time.AfterFunc(l.every, func() { l.tick(key) })
	return true
}

// tick ends an interval of a kind: it writes the count line when there were repeats and keeps
// counting, or forgets the kind when there were none.
func (l *Limiter) tick(key kindKey) {
	l.mu.Lock()
	k := l.kinds[key]
	if k == nil {
		l.mu.Unlock()
		return
	}
	n := k.n
	k.n = 0
	if n == 0 {
		delete(l.kinds, key)
	} else {
		k.timer.Reset(l.every)
	}
	l.mu.Unlock()
	if n > 0 {
		l.count(key, k.level, n)
	}
}

// Flush writes the count lines of every kind now and forgets them all: what a process does when it
// stops, so that no repeat goes uncounted.
func (l *Limiter) Flush() {
	l.mu.Lock()
	kinds := l.kinds
	l.kinds = map[kindKey]*repeats{}
	l.mu.Unlock()
	for key, k := range kinds {
		k.timer.Stop()
		if k.n > 0 {
			l.count(key, k.level, k.n)
		}
	}
}

func (l *Limiter) count(key kindKey, level slog.Level, n int) {
	l.log.LogAttrs(context.Background(), level, key.msg+": … "+Thousands(n)+" more in the last "+Seconds(l.every),
		slog.String("kind", key.kind), slog.Int("repeats", n))
}

// Thousands writes n with a comma between groups of three digits: 12,345.
func Thousands(n int) string {
	s := strconv.Itoa(n)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	out := make([]byte, 0, len(s)+len(s)/3+1)
	if neg {
		out = append(out, '-')
	}
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// Seconds writes an interval the way the count lines say it: "10 s", "1.5 s", "200 ms".
func Seconds(d time.Duration) string {
	if d < time.Second {
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}
