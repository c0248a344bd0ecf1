package ratelimit

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
)

// Shared limits (docs/OPERATIONS.md, "Shared limits"): with --redis, every limit is counted in Redis
// (or Valkey), so that N edges and control-plane replicas enforce one limit exactly instead of each its
// share. Redis runs Lua scripts atomically on its own clock: GCRA, the continuous token bucket of Local
// expressed as one "theoretical arrival time" per bucket (a key that expires once the bucket is full
// again). The edge's limiter leases slices of a bucket (lease.go); the API's throttles ask per call. When Redis cannot be reached (an error or no answer within
// Timeout), the process decides with its own buckets (limit / edge count, as without Redis), counts
// it in svc_ratelimit_fallback_total, logs it once a minute, and tries Redis again after RetryDown:
// limits never take the endpoints down.

// Defaults of RedisOptions.
const (
	DefaultRedisTimeout   = 250 * time.Millisecond
	DefaultRedisRetryDown = time.Second
)

// RedisOptions configure a Redis counter.
type RedisOptions struct {
	URL string // redis://[user:password@]host:port/db, or rediss:// for TLS
	// Timeout bounds a connection and each call; past it the decision is made locally.
	Timeout time.Duration
	// RetryDown is how long the process decides locally after a failed call before trying Redis again.
	RetryDown time.Duration
	Logger    *slog.Logger
}

// Redis counts limits in Redis. One value serves the edge's limiter and the API's throttles of a
// process; it is safe for concurrent use.
type Redis struct {
	c         *redis.Client
	log       *slog.Logger
	retryDown time.Duration
	fallbacks *prometheus.CounterVec

	downUntil atomic.Int64 // Unix ns: until then, decide locally
	lastLog   atomic.Int64 // Unix ns of the last "cannot be reached" line
	down      atomic.Bool  // the last call failed (for the "reachable again" line)
}

// NewRedis connects to Redis lazily: a server that is not there yet makes the limits local until it
// is, never a failed start. A malformed URL is an error.
func NewRedis(o RedisOptions) (*Redis, error) {
	opts, err := redis.ParseURL(o.URL)
	if err != nil {
		// Not the parser's words: they may quote the URL, password and all.
		return nil, fmt.Errorf("--redis: not a Redis URL; give redis://[:password@]host:6379/0 (or rediss:// for TLS)")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRedisTimeout
	}
	if o.RetryDown <= 0 {
		o.RetryDown = DefaultRedisRetryDown
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = o.Timeout, o.Timeout, o.Timeout, o.Timeout
	opts.MaxRetries = -1 // a failed call is decided locally at once, not retried on the request's time
	opts.DialerRetries, opts.DialerRetryTimeout = 1, time.Millisecond
	// The client's own log (to stderr, outside the process's logger) would repeat every failed dial;
	// failed says it once a minute instead.
	redis.SetLogger(silent{})
	return &Redis{
		c: redis.NewClient(opts), log: o.Logger, retryDown: o.RetryDown,
		fallbacks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "svc_ratelimit_fallback_total",
			Help: "Limit decisions made with this process's own buckets because Redis could not be reached, by limiter (edge, mint, signin)."},
			[]string{"limiter"}),
	}, nil
}

// silent drops go-redis's own log lines.
type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}

// Register exports svc_ratelimit_fallback_total on reg.
func (r *Redis) Register(reg prometheus.Registerer) { reg.MustRegister(r.fallbacks) }

// Fallbacks returns how many decisions of limiter were made locally.
func (r *Redis) Fallbacks(limiter string) float64 {
	var m dto.Metric
	if r.fallbacks.WithLabelValues(limiter).Write(&m) != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}

// Ping reports whether Redis answers now.
func (r *Redis) Ping(ctx context.Context) error { return r.c.Ping(ctx).Err() }

// Close closes the connections (nothing on a nil Redis).
func (r *Redis) Close() error {
	if r == nil {
		return nil
	}
	return r.c.Close()
}

// up reports whether to ask Redis (false for RetryDown after a failure).
func (r *Redis) up() bool { return time.Now().UnixNano() >= r.downUntil.Load() }

// failed notes a failed call: local decisions for RetryDown, and a log line at most once a minute.
func (r *Redis) failed(err error) {
	now := time.Now()
	r.downUntil.Store(now.Add(r.retryDown).UnixNano())
	r.down.Store(true)
	if last := r.lastLog.Load(); now.UnixNano()-last >= int64(time.Minute) && r.lastLog.CompareAndSwap(last, now.UnixNano()) {
		r.log.Warn("rate limits: Redis cannot be reached; each process counts with its own buckets (limit / edge count) until it is back",
			"err", err)
	}
}

// ok notes a call that Redis answered.
func (r *Redis) ok() {
	if r.down.Load() && r.down.CompareAndSwap(true, false) {
		r.log.Info("rate limits: Redis answers again; limits are counted there")
	}
}

// KeyBuckets is a token bucket per key (Buckets, or the same counted in Redis).
type KeyBuckets interface {
	Take(key string) (ok bool, retryAfter time.Duration)
}

// KeyBackoff is a growing delay per key after failures (Backoff, or the same counted in Redis).
type KeyBackoff interface {
	Wait(key string) time.Duration
	Fail(key string) time.Duration
	Reset(key string)
}

var (
	_ KeyBuckets = (*Buckets)(nil)
	_ KeyBackoff = (*Backoff)(nil)
)

// oneBucket is GCRA for one key: ARGV = burst, emission interval in µs. It answers the wait in µs (0:
// admitted, and spent).
var oneBucket = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local burst, T = tonumber(ARGV[1]), tonumber(ARGV[2])
local v = redis.call('GET', KEYS[1])
local tat = now
if v then tat = math.max(tonumber(v), now) end
local w = tat - now - (burst - 1) * T
if w > 0 then return math.ceil(w) end
tat = tat + T
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 0
`)

// Buckets returns buckets like NewBuckets(burst, every) counted in Redis under name; local decides
// while Redis cannot be reached.
func (r *Redis) Buckets(name string, burst int, every time.Duration, local *Buckets) KeyBuckets {
	return &sharedBuckets{r: r, name: name, burst: burst, every: every, local: local}
}

type sharedBuckets struct {
	r     *Redis
	name  string
	burst int
	every time.Duration
	local *Buckets
}

func (b *sharedBuckets) Take(key string) (bool, time.Duration) {
	if b.r.up() {
		wait, err := oneBucket.Run(context.Background(), b.r.c, []string{"svc:th:" + b.name + ":" + key},
			b.burst, b.every.Microseconds()).Int64()
		if err == nil {
			b.r.ok()
			return wait == 0, time.Duration(wait) * time.Microsecond
		}
		b.r.failed(err)
	}
	b.r.fallbacks.WithLabelValues(b.name).Inc()
	return b.local.Take(key)
}

// backoffScript keeps a key's failures in a hash {n, until (µs)} that expires Forget after the last
// failure. ARGV[1] is the operation: "wait" answers the µs left to wait; "fail" (with free, base µs, max
// µs, forget ms) counts a failure and answers the wait it now has.
var backoffScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if ARGV[1] == 'wait' then
  local u = redis.call('HGET', KEYS[1], 'until')
  if not u then return 0 end
  return math.max(0, math.ceil(tonumber(u) - now))
end
local free, base, maxd, forget = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
redis.call('PEXPIRE', KEYS[1], forget)
local over = n - free
local u = tonumber(redis.call('HGET', KEYS[1], 'until') or now)
if over > 0 then
  local d = maxd
  if over <= 30 then d = math.min(base * 2 ^ (over - 1), maxd) end
  u = now + d
  redis.call('HSET', KEYS[1], 'until', string.format('%.0f', u))
end
return math.max(0, math.ceil(u - now))
`)

// Backoff returns a delay like NewBackoff(free, base, max, forget) counted in Redis under name; local
// decides while Redis cannot be reached.
func (r *Redis) Backoff(name string, free int, base, max, forget time.Duration, local *Backoff) KeyBackoff {
	return &sharedBackoff{r: r, name: name, free: free, base: base, max: max, forget: forget, local: local}
}

type sharedBackoff struct {
	r                 *Redis
	name              string
	free              int
	base, max, forget time.Duration
	local             *Backoff
}

func (b *sharedBackoff) key(k string) []string { return []string{"svc:th:" + b.name + ":" + k} }

func (b *sharedBackoff) Wait(key string) time.Duration {
	if b.r.up() {
		us, err := backoffScript.Run(context.Background(), b.r.c, b.key(key), "wait").Int64()
		if err == nil {
			b.r.ok()
			return time.Duration(us) * time.Microsecond
		}
		b.r.failed(err)
	}
	b.r.fallbacks.WithLabelValues(signinLabel(b.name)).Inc()
	return b.local.Wait(key)
}

func (b *sharedBackoff) Fail(key string) time.Duration {
	if b.r.up() {
		us, err := backoffScript.Run(context.Background(), b.r.c, b.key(key), "fail", b.free, b.base.Microseconds(),
			b.max.Microseconds(), b.forget.Milliseconds()).Int64()
		if err == nil {
			b.r.ok()
			return time.Duration(us) * time.Microsecond
		}
		b.r.failed(err)
	}
	b.r.fallbacks.WithLabelValues(signinLabel(b.name)).Inc()
	return b.local.Fail(key)
}

func (b *sharedBackoff) Reset(key string) {
	if b.r.up() {
		if err := b.r.c.Del(context.Background(), b.key(key)[0]).Err(); err == nil {
			b.r.ok()
		} else {
			b.r.failed(err)
		}
	}
	b.local.Reset(key) // the local count may have been used during an outage
}

// signinLabel is the metric label of a sign-in backoff ("signin-account" and "signin-address" are both
// "signin").
func signinLabel(name string) string {
	if strings.HasPrefix(name, "signin") {
		return "signin"
	}
	return name
}
