package db_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/svcdev/svc/db"
	"github.com/svcdev/svc/db/dbsqlc"
	"github.com/svcdev/svc/db/storetest"
)

// BenchmarkTx measures small write transactions from 8 goroutines on the pass's engine: what taking
// turns (db.Tx) costs when management calls and run batches arrive together.
var parallelism = 8

func BenchmarkTx(b *testing.B) {
	ctx := context.Background()
	sqldb := storetest.Open(b)
	q := db.For(sqldb)
	var n atomic.Int64
	b.SetParallelism(parallelism)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := fmt.Sprint("b", n.Add(1))
			err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
				_, err := q.EdgeBatchAdd(ctx, tx, dbsqlc.EdgeBatchAddParams{ID: id, Runs: 1, CreatedAt: 1})
				return err
			})
			if err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkTxOneWriter(b *testing.B) {
	ctx := context.Background()
	sqldb := storetest.Open(b)
	q := db.For(sqldb)
	for i := 0; b.Loop(); i++ {
		err := db.Tx(ctx, sqldb, func(tx *sql.Tx) error {
			_, err := q.EdgeBatchAdd(ctx, tx, dbsqlc.EdgeBatchAddParams{ID: fmt.Sprint("b", i), Runs: 1, CreatedAt: 1})
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
