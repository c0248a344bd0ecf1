package mockupstream

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Judge is a pairwise judge an eval asks (internal/evalscore's JudgeBody: the last message holds
// "Answer A:" and "Answer B:"), answering with OpenAI's non-streamed chat wire: "A" or "B" for the
// one answer that contains word, "tie" when both or neither do.
func Judge(word string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		choice := "tie"
		if n := len(body.Messages); n > 0 {
			_, rest, _ := strings.Cut(body.Messages[n-1].Content, "\n\nAnswer A:\n")
			a, b, _ := strings.Cut(rest, "\n\nAnswer B:\n")
			switch {
			case strings.Contains(a, word) && !strings.Contains(b, word):
				choice = "A"
			case strings.Contains(b, word) && !strings.Contains(a, word):
				choice = "B"
			}
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"j","object":"chat.completion","created":1,"model":"judge","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, choice)
	})
}
