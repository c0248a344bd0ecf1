package translate

import (
	"encoding/json"
	"strings"
	"testing"
)

// An item id names its response: the ids svc makes are read back to it, anything else is not.
func TestItemReferences(t *testing.T) {
	body := `{"input":[{"type":"message","role":"user","content":"a"},{"type":"item_reference","id":"msg_0192abcdef01A0xyzXYZ12_1"},` +
		`{"type":"item_reference","id":"rs_0192abcdef01A0xyzXYZ12_0"},{"type":"item_reference","id":"msg_a/b_1"},{"type":"item_reference","id":"bogus"}]}`
	refs := ItemReferences([]byte(body))
	want := []ItemReference{
		{"msg_0192abcdef01A0xyzXYZ12_1", "resp_0192abcdef01A0xyzXYZ12", "input[1]"},
		{"rs_0192abcdef01A0xyzXYZ12_0", "resp_0192abcdef01A0xyzXYZ12", "input[2]"},
		{"msg_a/b_1", "", "input[3]"},
		{"bogus", "", "input[4]"},
	}
	if len(refs) != len(want) {
		t.Fatalf("refs %v", refs)
	}
	for i := range want {
		if refs[i] != want[i] {
			t.Errorf("ref %d = %+v, want %+v", i, refs[i], want[i])
		}
	}
	if ItemReferences([]byte(`{"input":"item_reference"}`)) != nil || ItemReferences([]byte(`{"input":[]}`)) != nil {
		t.Error("references where there are none")
	}
	// The round trip: an id itemID made names the response it was made for.
	if got := responseOfItem(itemID("fc", "resp_0192abcdef01A0xyzXYZ12", 3)); got != "resp_0192abcdef01A0xyzXYZ12" {
		t.Errorf("round trip %q", got)
	}
}

// The items are put in place of their references, and the request then translates as if sent whole.
func TestWithItems(t *testing.T) {
	stored := `{"object":"response","output":[{"id":"rs_R_0","type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"hm"}]},` +
		`{"id":"msg_R_1","type":"message","role":"assistant","status":"completed","content":[{"type":"output_text","text":"first answer","annotations":[]}]}]}`
	if OutputItem([]byte(stored), "msg_R_9") != nil {
		t.Error("an item the response does not hold")
	}
	item := OutputItem([]byte(stored), "msg_R_1")
	body := `{"model":"m","input":[{"role":"user","content":"one"},{"type":"item_reference","id":"msg_R_1"},{"role":"user","content":"two"}]}`
	// Translated as sent, the request stops at its first reference and says so, for the edge to put
	// the items in place; the references' request made whole translates.
	if _, _, e := responsesJSON([]byte(body), Options{}); e == nil || !e.References || e.Param != "input[1].type" {
		t.Errorf("a request with a reference: %+v", e)
	}
	if _, _, e := responsesJSON([]byte(`{"model":"m","input":[{"role":"user","content":"one"}],"tools":[{"type":"nope"}]}`), Options{}); e == nil || e.References {
		t.Errorf("another error: %+v", e)
	}
	out, e := WithItems([]byte(body), map[string]json.RawMessage{"msg_R_1": item})
	if e != nil {
		t.Fatal(e)
	}
	chat, _, e := responsesJSON(out, Options{Secret: []byte("k")})
	if e != nil {
		t.Fatal(e)
	}
	if !strings.Contains(string(chat), `{"role":"assistant","content":"first answer"}`) {
		t.Errorf("chat %s", chat)
	}
	_, e = WithItems([]byte(body), nil)
	if e == nil || e.Param != "input[1]" || !strings.Contains(e.Message, "Item with id 'msg_R_1' not found") ||
		!strings.Contains(e.Message, "`store` is set to false") {
		t.Errorf("missing item: %v", e)
	}
}

// reasoning.summary: the reasoning text is each reasoning item's summary, plain and streamed, with the
// summary events clients render; without it the summary stays empty.
func TestReasoningSummary(t *testing.T) {
	const completion = `{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Yes.","reasoning_content":"Think first."},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3}}`
	for _, asked := range []bool{false, true} {
		req := `{"input":"why?"}`
		if asked {
			req = `{"input":"why?","reasoning":{"summary":"detailed"}}`
		}
		info := responsesInfo(t, req)
		plain, _, err := ChatToResponse([]byte(completion), "resp_abc", "m", 7, info)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Output []struct {
				Type    string `json:"type"`
				Summary []struct{ Type, Text string }
			}
		}
		json.Unmarshal(plain, &r)
		if r.Output[0].Type != "reasoning" {
			t.Fatalf("output %s", plain)
		}
		if got := len(r.Output[0].Summary); asked && (got != 1 || r.Output[0].Summary[0].Type != "summary_text" || r.Output[0].Summary[0].Text != "Think first.") || !asked && got != 0 {
			t.Errorf("asked %v: summary %+v", asked, r.Output[0].Summary)
		}

		s := NewResponsesStream("resp_abc", "m", 7, responsesInfo(t, req), 1)
		var names []string
		var deltas string
		for _, c := range []string{`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"Think "}}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"first."}}]}`,
			`{"id":"x","choices":[{"index":0,"delta":{"content":"Yes."},"finish_reason":"stop"}]}`} {
			ev, err := s.Chunk([]byte(c))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ev {
				names = append(names, e.Name)
				if e.Name == "response.reasoning_summary_text.delta" {
					var d struct {
						Delta        string `json:"delta"`
						SummaryIndex *int   `json:"summary_index"`
					}
					json.Unmarshal(e.Data, &d)
					if d.SummaryIndex == nil || *d.SummaryIndex != 0 {
						t.Errorf("delta %s", e.Data)
					}
					deltas += d.Delta
				}
			}
		}
		ev, _ := s.Finish()
		for _, e := range ev {
			names = append(names, e.Name)
		}
		all := strings.Join(names, " ")
		has := strings.Contains(all, "response.reasoning_summary_part.added response.reasoning_text.delta response.reasoning_summary_text.delta") &&
			strings.Contains(all, "response.reasoning_summary_text.done response.reasoning_summary_part.done response.output_item.done")
		if asked != has || asked && deltas != "Think first." {
			t.Errorf("asked %v: events %s (summary deltas %q)", asked, all, deltas)
		}
	}
}
