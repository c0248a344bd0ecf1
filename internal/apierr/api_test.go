package apierr

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/svcdev/svc/internal/edgemodel"

	"github.com/svcdev/svc/cloudapi"
)

// TestAPIEnvelopeIsWhatTheSDKReads writes the envelope from a real server and reads it with the SDK:
// the status, the code and the message arrive as written.
func TestAPIEnvelopeIsWhatTheSDKReads(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		APIError(&edgemodel.Error{Code: edgemodel.CodeSlugTaken, Message: `the slug "a" is taken`}).Write(w)
	}))
	defer ts.Close()
	_, err := cloudapi.New(ts.URL, "tok").WithProject("o", "p").GetDeployment(context.Background(), "dep_1")
	var ce *cloudapi.Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want a *cloudapi.Error", err)
	}
	if ce.Status != http.StatusConflict || ce.Code != edgemodel.CodeSlugTaken || ce.Message != `the slug "a" is taken` {
		t.Fatalf("the SDK read %d %q %q", ce.Status, ce.Code, ce.Message)
	}
	want := `{"error":{"status":409,"code":"slug_taken","message":"the slug \"a\" is taken"}}` + "\n"
	if got := string(APIError(&edgemodel.Error{Code: edgemodel.CodeSlugTaken, Message: `the slug "a" is taken`}).JSON()); got != want {
		t.Fatalf("envelope\n got %s\nwant %s", got, want)
	}
}

// TestEveryCoreCodeHasItsStatus reads the error codes from their source (internal/edgemodel), so that a code added there
// without a status here fails (it would be answered as a 500).
func TestEveryCoreCodeHasItsStatus(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../edgemodel/errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || len(vs.Names[0].Name) < 5 || vs.Names[0].Name[:4] != "Code" {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			code, _ := strconv.Unquote(lit.Value)
			codes = append(codes, code)
		}
		return true
	})
	if len(codes) < 10 {
		t.Fatalf("found %d codes in edgemodel/errors.go; did its layout change?", len(codes))
	}
	for _, code := range codes {
		if APIStatus(code) == http.StatusInternalServerError {
			t.Errorf("core's code %q has no status in APIStatus", code)
		}
	}
	for code, want := range map[string]int{
		edgemodel.CodeInvalidSlug: 400, edgemodel.CodeUnauthorized: 401, edgemodel.CodeAnonymousLimit: 403, edgemodel.CodeModelNotFound: 404,
		edgemodel.CodeKeyLimit: 409, edgemodel.CodeTooManyRequests: 429, CodeBodyTooLarge: 413, CodeInternal: 500, "no_such_code": 500,
	} {
		if got := APIStatus(code); got != want {
			t.Errorf("APIStatus(%q) = %d, want %d", code, got, want)
		}
	}
}
