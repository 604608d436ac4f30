package errandhttp

import (
	"encoding/json"
	"fmt"
	"html"
	"html/template"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"

	contract "github.com/errandhq/errand/api"
	"go.yaml.in/yaml/v3"
)

// apiDoc is the API's contract (api/openapi.yaml) as the dashboard's API
// page shows it: its operations by tag, in the file's order.
type apiDoc struct {
	Title, Version, Description string
	Groups                      []apiGroup
}

type apiGroup struct {
	Tag, Description string
	Ops              []apiOp
}

type apiOp struct {
	Method, Path, ID, Summary, Description string
	Params                                 []apiParam
	Example                                string // the request body's example, as indented JSON
	Responses                              []apiResponse
}

type apiParam struct {
	Name, In, Type, Description string
	Required                    bool
}

type apiResponse struct{ Status, Description string }

// The parts of an OpenAPI document the page reads.
type (
	oasDoc struct {
		Info struct {
			Title, Version, Description string
		}
		Tags []struct {
			Name, Description string
		}
		Paths      yaml.Node
		Components struct {
			Parameters map[string]oasParam
			Responses  map[string]struct{ Description string }
		}
	}
	oasOp struct {
		OperationID          string `yaml:"operationId"`
		Summary, Description string
		Tags                 []string
		Parameters           []oasParam
		RequestBody          *struct {
			Content map[string]struct {
				Example any
			}
		} `yaml:"requestBody"`
		Responses yaml.Node
	}
	oasParam struct {
		Ref                   string `yaml:"$ref"`
		Name, In, Description string
		Required              bool
		Schema                struct {
			Type any
		}
	}
	oasResponse struct {
		Ref         string `yaml:"$ref"`
		Description string
	}
)

// parsedContract is the contract, parsed once.
var parsedContract = sync.OnceValues(func() (*apiDoc, error) { return parseContract(contract.OpenAPI) })

// parseContract reads an OpenAPI document into the page's view.
func parseContract(b []byte) (*apiDoc, error) {
	var d oasDoc
	if err := yaml.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("parse the API contract: %w", err)
	}
	doc := &apiDoc{Title: d.Info.Title, Version: d.Info.Version, Description: d.Info.Description}
	group := map[string]int{}
	for _, t := range d.Tags {
		group[t.Name] = len(doc.Groups)
		doc.Groups = append(doc.Groups, apiGroup{Tag: t.Name, Description: t.Description})
	}
	paths := d.Paths.Content
	for i := 0; i+1 < len(paths); i += 2 {
		path, item := paths[i].Value, paths[i+1].Content
		var shared []oasParam
		for k := 0; k+1 < len(item); k += 2 {
			if item[k].Value == "parameters" {
				if err := item[k+1].Decode(&shared); err != nil {
					return nil, fmt.Errorf("parse the API contract: %s parameters: %w", path, err)
				}
			}
		}
		for k := 0; k+1 < len(item); k += 2 {
			method := strings.ToUpper(item[k].Value)
			if !slices.Contains([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, method) {
				continue
			}
			var o oasOp
			if err := item[k+1].Decode(&o); err != nil {
				return nil, fmt.Errorf("parse the API contract: %s %s: %w", method, path, err)
			}
			op, err := viewOp(&d, method, path, append(slices.Clone(shared), o.Parameters...), &o)
			if err != nil {
				return nil, err
			}
			tag := ""
			if len(o.Tags) > 0 {
				tag = o.Tags[0]
			}
			g, ok := group[tag]
			if !ok {
				group[tag] = len(doc.Groups)
				g = len(doc.Groups)
				doc.Groups = append(doc.Groups, apiGroup{Tag: tag})
			}
			doc.Groups[g].Ops = append(doc.Groups[g].Ops, op)
		}
	}
	return doc, nil
}

// viewOp is one operation of d as the page shows it.
func viewOp(d *oasDoc, method, path string, params []oasParam, o *oasOp) (apiOp, error) {
	op := apiOp{Method: method, Path: path, ID: o.OperationID, Summary: o.Summary, Description: o.Description}
	for _, p := range params {
		if p.Ref != "" {
			p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		op.Params = append(op.Params, apiParam{Name: p.Name, In: p.In, Type: fmt.Sprint(p.Schema.Type), Description: p.Description, Required: p.Required})
	}
	if o.RequestBody != nil {
		if c, ok := o.RequestBody.Content["application/json"]; ok && c.Example != nil {
			b, err := json.MarshalIndent(c.Example, "", "  ")
			if err != nil {
				return op, fmt.Errorf("parse the API contract: %s %s: its example: %w", method, path, err)
			}
			op.Example = string(b)
		}
	}
	rs := o.Responses.Content
	for i := 0; i+1 < len(rs); i += 2 {
		var r oasResponse
		if err := rs[i+1].Decode(&r); err != nil {
			return op, fmt.Errorf("parse the API contract: %s %s: response %s: %w", method, path, rs[i].Value, err)
		}
		if r.Description == "" && r.Ref != "" {
			r.Description = d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")].Description
		}
		op.Responses = append(op.Responses, apiResponse{Status: rs[i].Value, Description: r.Description})
	}
	return op, nil
}

// apiPage shows the JSON API's contract.
func (d *dashboard) apiPage(w http.ResponseWriter, r *http.Request) {
	doc, err := parsedContract()
	if err != nil {
		d.fail(w, r, err)
		return
	}
	p := d.newPage(r, "JSON API", "api", d.timeNow(r), false)
	p.Data = doc
	d.render(w, http.StatusOK, "apidoc", p)
}

// codeSpan is a `code span` of the contract's Markdown descriptions.
var codeSpan = regexp.MustCompile("`([^`]+)`")

// codeSpans renders s, the contract's plain text, with its code spans as
// <code>: s is escaped first, so nothing else of it becomes markup.
func codeSpans(s string) template.HTML {
	return template.HTML(codeSpan.ReplaceAllString(html.EscapeString(s), "<code>$1</code>"))
}
