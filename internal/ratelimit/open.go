package ratelimit

import (
	"context"
	"log/slog"
	"time"
)

// Open connects to Redis for the shared limits (--redis), or returns nil without a URL. A Redis
// that does not answer yet is not an error: the limits are counted in this process until it does.
func Open(ctx context.Context, url string, log *slog.Logger) (*Redis, error) {
	if url == "" {
		return nil, nil
	}
	r, err := NewRedis(RedisOptions{URL: url, Logger: log})
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := r.Ping(pctx); err != nil {
		log.Warn("rate limits: Redis does not answer yet; limits are counted in this process until it does", "err", err)
	} else {
		log.Info("rate limits: counted in Redis, shared with every process that uses it")
	}
	return r, nil
}
