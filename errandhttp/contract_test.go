package errandhttp_test

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	contract "github.com/errandhq/errand/api"
	"github.com/errandhq/errand/errandhttp"
	"github.com/errandhq/errand/errandstore"
	"github.com/errandhq/errand/errandtest"
	"go.yaml.in/yaml/v3"
)

// contractOp is what TestContractExamples reads of an operation.
type contractOp struct {
	OperationID string `yaml:"operationId"`
	Parameters  []contractParam
	RequestBody *struct {
		Content map[string]struct{ Example any }
	} `yaml:"requestBody"`
	Responses map[string]yaml.Node
}

// contractParam is what it reads of a parameter. One given by $ref reads
// as not required: should it be, the request without it fails the test.
type contractParam struct {
	Name, In string
	Required bool
	Ref      string `yaml:"$ref"`
}

// TestContractPathExamples sends every operation of api/openapi.yaml that
// has path parameters to a real server, on both stores, with the example
// body the file gives and a name that matches nothing in each parameter:
// each answers one of the statuses the file documents for it, success or
// error, with a JSON body, so that every route the file names is served
// as it says.
func TestContractPathExamples(t *testing.T) {
	var doc struct {
		Paths      map[string]map[string]contractOp
		Components struct{ Parameters map[string]contractParam }
	}
	if err := yaml.Unmarshal(contract.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		tried := 0
		for path, item := range doc.Paths {
			if !strings.Contains(path, "{") {
				continue
			}
			for method, op := range item {
				if op.OperationID == "" {
					continue
				}
				target := path
				for _, p := range op.Parameters {
					if name, ok := strings.CutPrefix(p.Ref, "#/components/parameters/"); ok {
						p = doc.Components.Parameters[name]
					}
					if p.In == "path" {
						target = strings.ReplaceAll(target, "{"+p.Name+"}", "absent-"+p.Name)
					}
				}
				if strings.Contains(target, "{") {
					t.Errorf("%s %s: a path parameter is not declared: %s", method, path, target)
					continue
				}
				var body any
				if op.RequestBody != nil {
					if c, ok := op.RequestBody.Content["application/json"]; ok {
						body = c.Example
					}
				}
				r := s.do(t, req{method: strings.ToUpper(method), path: target, token: operatorSecret, body: body})
				if _, ok := op.Responses[strconv.Itoa(r.status)]; !ok {
					t.Errorf("%s %s (%s): %d %s; the file does not document that status", method, target, op.OperationID, r.status, r.body)
					continue
				}
				if ct := r.header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") && !json.Valid(r.body) {
					t.Errorf("%s %s: the answer is not JSON: %s", method, target, r.body)
				}
				tried++
			}
		}
		if tried < 20 {
			t.Errorf("tried %d operations with path parameters, want at least 20", tried)
		}
	})
}

// TestContractExamples sends every operation of api/openapi.yaml that
// needs no path parameter to a real server, on both stores, with the
// example body the file gives: each answers one of the success statuses
// the file documents for it, with a JSON body.
func TestContractExamples(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]contractOp
	}
	if err := yaml.Unmarshal(contract.OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		tried := 0
		for path, item := range doc.Paths {
			if strings.Contains(path, "{") {
				continue
			}
			for method, op := range item {
				if op.OperationID == "" {
					continue // not an operation
				}
				var body any
				if op.RequestBody != nil {
					c, ok := op.RequestBody.Content["application/json"]
					if !ok || c.Example == nil {
						t.Errorf("%s %s: its request body has no application/json example", method, path)
						continue
					}
					body = c.Example
				} else if slices.ContainsFunc(op.Parameters, func(p contractParam) bool { return p.Required }) {
					continue // its required parameters have no example here
				}
				r := s.do(t, req{method: strings.ToUpper(method), path: path, token: operatorSecret, body: body})
				var ok []string
				for status := range op.Responses {
					if strings.HasPrefix(status, "2") {
						ok = append(ok, status)
					}
				}
				if !slices.Contains(ok, strconv.Itoa(r.status)) {
					t.Errorf("%s %s (%s) with its example: %d %s; the file documents %v", method, path, op.OperationID, r.status, r.body, ok)
					continue
				}
				if ct := r.header.Get("Content-Type"); strings.HasPrefix(ct, "application/json") && !json.Valid(r.body) {
					t.Errorf("%s %s: the answer is not JSON: %s", method, path, r.body)
				}
				tried++
			}
		}
		if tried < 10 {
			t.Errorf("tried %d operations; the file should give at least 10 that need no path parameter", tried)
		}
	})
}

// TestContractServed: the server answers its contract at
// /api/v1/openapi.yaml to any token, and the dashboard shows it as a page
// (/api-docs) naming every operation.
func TestContractServed(t *testing.T) {
	eachStore(t, func(t *testing.T, st errandstore.TxStore[*sql.Tx], clock *errandtest.Clock) {
		s := newServer(t, st, clock, nil)
		r := s.do(t, req{method: "GET", path: "/api/v1/openapi.yaml", token: readerSecret})
		want(t, "contract", r, http.StatusOK, "")
		if ct := r.header.Get("Content-Type"); ct != "application/yaml" || !bytes.Equal(r.body, contract.OpenAPI) {
			t.Fatalf("contract: %s, %d bytes; want application/yaml, api/openapi.yaml's %d bytes", ct, len(r.body), len(contract.OpenAPI))
		}
		rec := httptest.NewRecorder()
		errandhttp.NewDashboard(s.c, nil).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api-docs", nil))
		page := rec.Body.String()
		if rec.Code != http.StatusOK {
			t.Fatalf("API page: %d %s", rec.Code, page)
		}
		var doc struct {
			Paths map[string]map[string]struct {
				OperationID string `yaml:"operationId"`
			}
		}
		if err := yaml.Unmarshal(contract.OpenAPI, &doc); err != nil {
			t.Fatal(err)
		}
		for path, item := range doc.Paths {
			for _, op := range item {
				if op.OperationID != "" && !strings.Contains(page, `id="`+op.OperationID+`"`) {
					t.Errorf("the API page does not show %s (%s)", op.OperationID, path)
				}
			}
		}
	})
}
