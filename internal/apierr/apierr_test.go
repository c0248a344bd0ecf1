package apierr

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestOpenAI(t *testing.T) {
	cases := []struct {
		e    OpenAI
		want string
	}{
		{OpenAI{Message: "bad", Type: "invalid_request_error", Code: "invalid_request", Param: "max_tokens"},
			`{"error":{"message":"bad","type":"invalid_request_error","code":"invalid_request","param":"max_tokens"}}`},
		// Every member is present, as clients read them: an empty code and param are null.
		{OpenAI{Message: "gone"}, `{"error":{"message":"gone","type":"invalid_request_error","code":null,"param":null}}`},
		// <, > and & as they are, so that "Bearer <API_KEY>" reads as written in a terminal's curl.
		{OpenAI{Message: `a "quote" <b> & c`, Type: "api_error"}, `{"error":{"message":"a \"quote\" <b> & c","type":"api_error","code":null,"param":null}}`},
	}
	for _, c := range cases {
		if got := string(c.e.JSON()); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.e, got, c.want)
		}
	}
}

func TestAnthropic(t *testing.T) {
	for _, c := range []struct {
		e        Anthropic
		wantType string
	}{
		{Anthropic{Message: "m", Status: 400}, "invalid_request_error"},
		{Anthropic{Message: "m", Status: 401}, "authentication_error"},
		{Anthropic{Message: "m", Status: 404}, "not_found_error"},
		{Anthropic{Message: "m", Status: 413}, "request_too_large"},
		{Anthropic{Message: "m", Status: 429}, "rate_limit_error"},
		{Anthropic{Message: "m", Status: 499}, "invalid_request_error"},
		{Anthropic{Message: "m", Status: 502}, "api_error"},
		{Anthropic{Message: "m", Status: 503}, "overloaded_error"},
		// An upstream's own type is kept, whatever the status.
		{Anthropic{Message: "m", Status: 502, Type: "overloaded_error"}, "overloaded_error"},
	} {
		var got map[string]any
		if err := json.Unmarshal(c.e.JSON(), &got); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"type": "error", "error": map[string]any{"type": c.wantType, "message": "m"}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: %v, want %v", c.e, got, want)
		}
	}
}
