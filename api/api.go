// Package api holds the contract of errand's JSON API: openapi.yaml, an
// OpenAPI 3.1 description of every endpoint under /api/v1, its bodies,
// answers and error codes. errand serve serves it at /api/v1/openapi.yaml,
// and its dashboard shows it as a page at /api. Tests in errandhttp hold
// the file and the server to each other.
package api

import _ "embed"

// OpenAPI is openapi.yaml.
//
//go:embed openapi.yaml
var OpenAPI []byte
