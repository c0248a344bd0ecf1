// Command mockupstream runs the fake OpenAI-compatible upstream of the tests on a local port, for
// trying `svc server --models` against an "openai" runtime without a GPU.
package main

import (
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/svcdev/svc/internal/mockupstream"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8000", "listen address")
	model := flag.String("model", "mock-model", "base model id the upstream serves")
	tokens := flag.Int("tokens", 16, "completion tokens per answer")
	ttft := flag.Duration("ttft", 0, "time to first token")
	itl := flag.Duration("itl", 0, "inter-token latency")
	key := flag.String("api-key-env", "", "name of an env var holding the API key to require (optional)")
	flag.Parse()
	cfg := mockupstream.Config{Model: *model, Tokens: *tokens, TTFT: *ttft, ITL: *itl, ServeMessages: true}
	if *key != "" {
		cfg.APIKey = os.Getenv(*key)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	// The first line of output is the address, so that scripts (and svcbench) can use port 0.
	fmt.Printf("http://%s\n", ln.Addr())
	srv := &http.Server{Handler: mockupstream.New(cfg, false), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}
