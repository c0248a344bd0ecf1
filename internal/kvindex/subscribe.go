package kvindex

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-zeromq/zmq4"
)

// retryEvery is the wait before binding again after the socket failed.
const retryEvery = time.Second

// Subscribe binds a ZMQ SUB socket at endpoint (e.g. tcp://0.0.0.0:5557) and folds every KV-event
// batch the replicas publish to it (they connect: the simulator's --zmq-endpoint, vLLM's
// --kv-events-config endpoint naming svc's host) into x, off the request path, until ctx ends. A
// socket that fails is bound again after a second; what was missed meanwhile shows as sequence gaps
// (Partial). ready, when not nil, is closed once the socket is first bound.
func Subscribe(ctx context.Context, endpoint string, x *Index, log *slog.Logger, ready chan<- struct{}) {
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, endpoint, x, log, ready)
		ready = nil
		if ctx.Err() != nil {
			return
		}
		log.Warn("kv events: subscriber stopped; binding again", "endpoint", endpoint, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

func subscribeOnce(ctx context.Context, endpoint string, x *Index, log *slog.Logger, ready chan<- struct{}) error {
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	if err := sub.Listen(endpoint); err != nil {
		return err
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, "kv@"); err != nil {
		return err
	}
	if ready != nil {
		close(ready)
	}
	for {
		msg, err := sub.Recv()
		if err != nil {
			return err
		}
		if err := x.ApplyMessage(msg.Frames); err != nil {
			log.Debug("kv events: a malformed message", "err", err)
		}
	}
}
