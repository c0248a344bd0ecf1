// Package batchq hands items from many goroutines to one consumer that takes them in batches, without
// waking the consumer for each item.
package batchq

import (
	"sync"
	"sync/atomic"
)

// Queue is a bounded queue for one consumer. Put never blocks: a full queue refuses the item. The
// consumer waits on Ready (poked once when a batch's worth is queued) or on a timer of its own, then
// takes everything queued at once. A channel per item would wake the consumer for every item, which
// on a busy edge was thousands of goroutine switches a second.
type Queue[T any] struct {
	mu    sync.Mutex
	items []T
	limit int
	batch int
	ready chan struct{}
	n     atomic.Int64 // len(items), readable without the lock
}

// New returns a queue that holds at most limit items and signals Ready when batch items are queued.
func New[T any](limit, batch int) *Queue[T] {
	return &Queue[T]{limit: max(limit, 1), batch: max(batch, 1), ready: make(chan struct{}, 1)}
}

// Put queues v and reports whether it was taken (false when the queue already holds limit items).
func (q *Queue[T]) Put(v T) bool {
	q.mu.Lock()
	if len(q.items) >= q.limit {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, v)
	n := len(q.items)
	q.n.Store(int64(n))
	q.mu.Unlock()
	if n == q.batch {
		select {
		case q.ready <- struct{}{}:
		default: // already poked
		}
	}
	return true
}

// Ready receives when a batch's worth of items has been queued since the last Take.
func (q *Queue[T]) Ready() <-chan struct{} { return q.ready }

// Take returns every queued item, oldest first. buf, the slice a previous Take returned (or nil), is
// cleared and queues the next items, so that a consumer allocates nothing once two buffers have grown.
func (q *Queue[T]) Take(buf []T) []T {
	clear(buf)
	q.mu.Lock()
	items := q.items
	q.items = buf[:0]
	q.n.Store(0)
	q.mu.Unlock()
	return items
}

// Len returns how many items are queued.
func (q *Queue[T]) Len() int { return int(q.n.Load()) }
