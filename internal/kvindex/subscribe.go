package kvindex

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/go-zeromq/zmq4"
)

// retryEvery is the wait before binding or connecting again after the socket failed, and how often
// Follow looks at the replicas.
const retryEvery = time.Second

// Subscribe reads the KV-event batches published to endpoint (e.g. tcp://0.0.0.0:5557) into x, off the
// request path, until ctx ends. With dial false it binds there and the replicas connect
// (llm-d-inference-sim's --zmq-endpoint, a vLLM publisher whose endpoint names svc's host); with dial
// true it connects to a replica's own publisher (vLLM's default, which binds). Bound, a batch names its
// replica by its topic (kv@<host:port>@<model>, the simulator's and llm-d's); connected, by the replica
// (its address, host:port) the socket was made for, whatever the topic (vLLM's is "" unless set). A
// socket that fails is made again after a second; what was missed meanwhile shows as sequence gaps
// (Partial). ready, when not nil, is closed once the socket is first bound or connected.
func Subscribe(ctx context.Context, endpoint string, dial bool, x *Index, log *slog.Logger, ready chan<- struct{}) {
	subscribe(ctx, endpoint, dial, "", x, log, ready)
}

func subscribe(ctx context.Context, endpoint string, dial bool, replica string, x *Index, log *slog.Logger, ready chan<- struct{}) {
	for ctx.Err() == nil {
		err := subscribeOnce(ctx, endpoint, dial, replica, x, log, ready)
		ready = nil
		if ctx.Err() != nil {
			return
		}
		log.Warn("kv events: subscriber stopped; trying again", "endpoint", endpoint, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}

func subscribeOnce(ctx context.Context, endpoint string, dial bool, replica string, x *Index, log *slog.Logger, ready chan<- struct{}) error {
	sub := zmq4.NewSub(ctx)
	defer sub.Close()
	var err error
	if dial {
		err = sub.Dial(endpoint)
	} else {
		err = sub.Listen(endpoint)
	}
	if err != nil {
		return err
	}
	topic := "kv@"
	if replica != "" {
		topic = ""
	}
	if err := sub.SetOption(zmq4.OptionSubscribe, topic); err != nil {
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
		if err := x.applyMessage(msg.Frames, replica); err != nil {
			log.Debug("kv events: a malformed message", "err", err)
		}
	}
}

// Follow connects to the KV-event publisher at port on the host of each replica that replicas returns
// (their addresses, host:port, looked at every second as they come and go: replicas: {dns}), one
// subscriber each, until ctx ends.
func Follow(ctx context.Context, x *Index, port int, replicas func() []string, log *slog.Logger) {
	following := map[string]context.CancelFunc{}
	defer func() {
		for _, stop := range following {
			stop()
		}
	}()
	for {
		seen := map[string]bool{}
		for _, addr := range replicas() {
			seen[addr] = true
			host, _, err := net.SplitHostPort(addr)
			if following[addr] != nil || err != nil {
				continue
			}
			hctx, stop := context.WithCancel(ctx)
			following[addr] = stop
			go subscribe(hctx, "tcp://"+net.JoinHostPort(host, strconv.Itoa(port)), true, addr, x, log, nil)
		}
		for h, stop := range following {
			if !seen[h] {
				stop()
				delete(following, h)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(retryEvery):
		}
	}
}
