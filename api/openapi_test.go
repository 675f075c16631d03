package api

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/msgcenter/msgcenter/core"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// This file keeps openapi.yaml honest: it must list exactly the routes the
// server serves, describe every operation properly, name exactly the JSON
// fields of the Go types it documents, and contain no dangling $ref.

const openAPIFile = "openapi.yaml"

// oaDoc is the part of an OpenAPI 3.0 document the tests look at.
type oaDoc struct {
	OpenAPI    string                          `yaml:"openapi"`
	Security   []map[string][]string           `yaml:"security"`
	Paths      map[string]map[string]yaml.Node `yaml:"paths"`
	Components struct {
		Schemas         map[string]oaSchema  `yaml:"schemas"`
		Parameters      map[string]oaParam   `yaml:"parameters"`
		SecuritySchemes map[string]yaml.Node `yaml:"securitySchemes"`
	} `yaml:"components"`
}

type oaOperation struct {
	OperationID string                 `yaml:"operationId"`
	Parameters  []oaParam              `yaml:"parameters"`
	Responses   map[string]yaml.Node   `yaml:"responses"`
	Security    *[]map[string][]string `yaml:"security"`
}

type oaParam struct {
	Ref      string `yaml:"$ref"`
	Name     string `yaml:"name"`
	In       string `yaml:"in"`
	Required bool   `yaml:"required"`
}

type oaSchema struct {
	Type       string               `yaml:"type"`
	Properties map[string]yaml.Node `yaml:"properties"`
	Required   []string             `yaml:"required"`
	Enum       []string             `yaml:"enum"`
}

// oaHTTPMethods are the keys of a path item that are operations.
var oaHTTPMethods = map[string]bool{
	"get": true, "put": true, "post": true, "delete": true,
	"options": true, "head": true, "patch": true, "trace": true,
}

// oaSchemaTypes maps every component schema that documents a Go type to that
// type. The schema's properties must be exactly the type's JSON names.
var oaSchemaTypes = map[string]reflect.Type{
	// message
	"Message": reflect.TypeFor[message.Message](),
	"Thread":  reflect.TypeFor[message.Thread](),
	"Content": reflect.TypeFor[message.Content](),
	// model
	"Record":       reflect.TypeFor[model.Record](),
	"Route":        reflect.TypeFor[model.Route](),
	"Delivery":     reflect.TypeFor[model.Delivery](),
	"Lease":        reflect.TypeFor[model.Lease](),
	"Receipt":      reflect.TypeFor[model.Receipt](),
	"ContactRoute": reflect.TypeFor[model.ContactRoute](),
	"Conversation": reflect.TypeFor[model.Conversation](),
	"Event":        reflect.TypeFor[model.Event](),
	// wire
	"RecordWithMsg":           reflect.TypeFor[wire.RecordWithMsg](),
	"StateResult":             reflect.TypeFor[wire.StateResult](),
	"DispatchRequest":         reflect.TypeFor[wire.DispatchRequest](),
	"DispatchResult":          reflect.TypeFor[wire.DispatchResult](),
	"SendCtx":                 reflect.TypeFor[wire.SendCtx](),
	"PostSendRequest":         reflect.TypeFor[wire.PostSendRequest](),
	"PlannedDelivery":         reflect.TypeFor[wire.Delivery](),
	"PostSendResult":          reflect.TypeFor[wire.PostSendResult](),
	"NextRequest":             reflect.TypeFor[wire.NextRequest](),
	"StateRequest":            reflect.TypeFor[wire.StateRequest](),
	"DeliveryResult":          reflect.TypeFor[wire.DeliveryResult](),
	"DeliveryRequest":         reflect.TypeFor[wire.DeliveryRequest](),
	"LeaseRequest":            reflect.TypeFor[wire.LeaseRequest](),
	"RedriveRequest":          reflect.TypeFor[wire.RedriveRequest](),
	"RedriveResult":           reflect.TypeFor[wire.RedriveResult](),
	"ListResult":              reflect.TypeFor[wire.ListResult](),
	"SyncResult":              reflect.TypeFor[wire.SyncResult](),
	"StreamFrame":             reflect.TypeFor[wire.StreamFrame](),
	"PresenceResult":          reflect.TypeFor[wire.PresenceResult](),
	"WhoAmI":                  reflect.TypeFor[wire.WhoAmI](),
	"ReceiptRequest":          reflect.TypeFor[wire.ReceiptRequest](),
	"ReceiptsResult":          reflect.TypeFor[wire.ReceiptsResult](),
	"SubscribersRequest":      reflect.TypeFor[wire.SubscribersRequest](),
	"SubscribersResult":       reflect.TypeFor[wire.SubscribersResult](),
	"BlockResult":             reflect.TypeFor[wire.BlockResult](),
	"RoutesRequest":           reflect.TypeFor[wire.RoutesRequest](),
	"RoutesResult":            reflect.TypeFor[wire.RoutesResult](),
	"ConversationsResult":     reflect.TypeFor[wire.ConversationsResult](),
	"ReadConversationRequest": reflect.TypeFor[wire.ReadConversationRequest](),
	"ReadConversationResult":  reflect.TypeFor[wire.ReadConversationResult](),
	"EventsResult":            reflect.TypeFor[wire.EventsResult](),
	"ScheduledItem":           reflect.TypeFor[wire.ScheduledItem](),
	"ScheduledResult":         reflect.TypeFor[wire.ScheduledResult](),
	"FlushRequest":            reflect.TypeFor[wire.FlushRequest](),
	"FlushResult":             reflect.TypeFor[wire.FlushResult](),
	"Aggregate":               reflect.TypeFor[wire.Aggregate](),
	"AggregateStatus":         reflect.TypeFor[wire.AggregateStatus](),
	"PendingMail":             reflect.TypeFor[wire.PendingMail](),
	"PendingMailResult":       reflect.TypeFor[wire.PendingMailResult](),
	"MailFlushResult":         reflect.TypeFor[wire.MailFlushResult](),
	"TokenRequest":            reflect.TypeFor[wire.TokenRequest](),
	"TokenResult":             reflect.TypeFor[wire.TokenResult](),
	"Block":                   reflect.TypeFor[model.Block](),
	"BlocksResult":            reflect.TypeFor[wire.BlocksResult](),
	"TokenInfo":               reflect.TypeFor[wire.TokenInfo](),
	"TokensResult":            reflect.TypeFor[wire.TokensResult](),
	"ConsumerFilter":          reflect.TypeFor[model.ConsumerFilter](),
	"ConsumerRequest":         reflect.TypeFor[wire.ConsumerRequest](),
	"ConsumerInfo":            reflect.TypeFor[wire.ConsumerInfo](),
	"ConsumersResult":         reflect.TypeFor[wire.ConsumersResult](),
	"AckRequest":              reflect.TypeFor[wire.AckRequest](),
	"StreamClientFrame":       reflect.TypeFor[wire.StreamClientFrame](),
	"StreamControlFrame":      reflect.TypeFor[wire.StreamControlFrame](),
	"RetentionPolicy":         reflect.TypeFor[wire.RetentionPolicy](),
	"RetentionResult":         reflect.TypeFor[wire.RetentionResult](),
	"Error":                   reflect.TypeFor[wire.ErrorBody](),
	"ErrorDetail":             reflect.TypeFor[wire.ErrorDetail](),
}

// oaSchemasWithoutGoType are object schemas with no named Go type behind them,
// each with the reason.
var oaSchemasWithoutGoType = map[string]string{
	"Health":      `GET /healthz writes map[string]string{"status": "ok"}`,
	"EmptyObject": "POST /v1/records/{record_id}/redrive decodes into struct{}",
}

// oaEnumValues maps every enum schema to the Go values it must list.
var oaEnumValues = map[string][]string{
	"BoxKind":     oaStrings(model.BoxKinds),
	"BoxFamily":   oaStrings(core.Families()),
	"State":       oaStrings(model.States),
	"MessageKind": message.Kinds,
	"ReceiptStatus": oaStrings([]model.ReceiptStatus{model.ReceiptUnread, model.ReceiptReading, model.ReceiptReaded,
		model.ReceiptAccepted, model.ReceiptRejected, model.ReceiptQuarantined}),
	"Role":      oaStrings([]model.Role{model.RoleAdmin, model.RoleAgent, model.RoleTunnel}),
	"EventType": model.EventTypes,
}

func oaStrings[T ~string](in []T) []string {
	out := make([]string, len(in))
	for i, v := range in {
		out[i] = string(v)
	}
	return out
}

func loadOpenAPI(t *testing.T) (*oaDoc, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(openAPIFile)
	if err != nil {
		t.Fatalf("read %s: %v", openAPIFile, err)
	}
	var doc oaDoc
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("parse %s: %v", openAPIFile, err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatalf("parse %s: %v", openAPIFile, err)
	}
	if doc.OpenAPI != "3.0.3" {
		t.Fatalf("%s: openapi = %q, want 3.0.3", openAPIFile, doc.OpenAPI)
	}
	return &doc, raw
}

// oaOperations decodes every operation of the document, keyed "METHOD path".
func oaOperations(t *testing.T, doc *oaDoc) map[string]oaOperation {
	t.Helper()
	ops := map[string]oaOperation{}
	for path, item := range doc.Paths {
		for key, node := range item {
			if !oaHTTPMethods[key] {
				continue
			}
			var op oaOperation
			if err := node.Decode(&op); err != nil {
				t.Fatalf("%s %s: decode operation: %v", strings.ToUpper(key), path, err)
			}
			ops[strings.ToUpper(key)+" "+path] = op
		}
	}
	return ops
}

// oaRouteKey normalizes a server route to "METHOD path" in OpenAPI form.
func oaRouteKey(rt Route) string {
	method, pattern := strings.ToUpper(rt.Method), rt.Pattern
	// Tolerate a method written into the pattern ("GET /x") and the
	// ServeMux-only exact-match marker "{$}".
	if m, p, ok := strings.Cut(pattern, " "); ok && method == "" {
		method, pattern = strings.ToUpper(m), p
	}
	pattern = strings.TrimSuffix(pattern, "{$}")
	return method + " " + pattern
}

func oaSortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestOpenAPIRoutesMatchServer(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	documented := oaOperations(t, doc)

	served := map[string]bool{}
	for _, rt := range Routes() {
		k := oaRouteKey(rt)
		if served[k] {
			t.Errorf("Routes() lists %s twice", k)
		}
		served[k] = true
	}
	if len(served) == 0 {
		t.Fatal("Routes() is empty")
	}

	for _, k := range oaSortedKeys(served) {
		if _, ok := documented[k]; !ok {
			t.Errorf("route %s is served (Routes()) but missing from %s", k, openAPIFile)
		}
	}
	for _, k := range oaSortedKeys(documented) {
		if !served[k] {
			t.Errorf("operation %s is in %s but not served (not in Routes())", k, openAPIFile)
		}
	}
}

var oaPathParamRE = regexp.MustCompile(`\{([^}]+)\}`)

func TestOpenAPIOperations(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	ops := oaOperations(t, doc)

	if len(doc.Security) == 0 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("global security must require bearerAuth, got %v", doc.Security)
	}
	if _, ok := doc.Components.SecuritySchemes["bearerAuth"]; !ok {
		t.Error("components.securitySchemes.bearerAuth is missing")
	}

	seenIDs := map[string]string{}
	for _, key := range oaSortedKeys(ops) {
		op := ops[key]
		method, path, _ := strings.Cut(key, " ")
		t.Run(key, func(t *testing.T) {
			if op.OperationID == "" {
				t.Error("no operationId")
			} else if prev, dup := seenIDs[op.OperationID]; dup {
				t.Errorf("operationId %q is also used by %s", op.OperationID, prev)
			} else {
				seenIDs[op.OperationID] = key
			}

			var success bool
			for code := range op.Responses {
				if n, err := strconv.Atoi(code); err == nil && n >= 200 && n <= 299 {
					success = true
				}
			}
			if !success {
				t.Errorf("no 2xx response among %v", oaSortedKeys(op.Responses))
			}

			// /v1 and the admin-only profiles authenticate; the rest
			// (/healthz, /metrics) is public.
			if strings.HasPrefix(path, "/v1/") || strings.HasPrefix(path, "/debug/") {
				if _, ok := op.Responses["401"]; !ok {
					t.Errorf("an authenticated operation must document 401; responses are %v", oaSortedKeys(op.Responses))
				}
				if op.Security != nil && len(*op.Security) == 0 {
					t.Error("a /v1 operation must not opt out of authentication (security: [])")
				}
			} else if op.Security == nil || len(*op.Security) != 0 {
				t.Errorf("public route %s %s must declare `security: []`", method, path)
			}

			// Path template parameters and declared path parameters agree.
			want := map[string]bool{}
			for _, m := range oaPathParamRE.FindAllStringSubmatch(path, -1) {
				want[m[1]] = true
			}
			got := map[string]bool{}
			var params []oaParam
			if node, ok := doc.Paths[path]["parameters"]; ok {
				var shared []oaParam
				if err := node.Decode(&shared); err != nil {
					t.Fatalf("decode path-level parameters: %v", err)
				}
				params = append(params, shared...)
			}
			params = append(params, op.Parameters...)
			for _, p := range params {
				if p.Ref != "" {
					name := strings.TrimPrefix(p.Ref, "#/components/parameters/")
					rp, ok := doc.Components.Parameters[name]
					if !ok {
						t.Errorf("parameter $ref %q does not resolve", p.Ref)
						continue
					}
					p = rp
				}
				if p.In != "path" {
					continue
				}
				if !p.Required {
					t.Errorf("path parameter %q must be required", p.Name)
				}
				got[p.Name] = true
			}
			for _, n := range oaSortedKeys(want) {
				if !got[n] {
					t.Errorf("path parameter {%s} is not declared", n)
				}
			}
			for _, n := range oaSortedKeys(got) {
				if !want[n] {
					t.Errorf("declared path parameter %q is not in the path template", n)
				}
			}
		})
	}
}

// oaJSONNames lists the JSON object keys encoding/json uses for struct type t.
func oaJSONNames(t reflect.Type) map[string]bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	out := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag, hasTag := f.Tag.Lookup("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" && !strings.HasPrefix(tag, "-,") {
			continue
		}
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for n := range oaJSONNames(ft) {
					out[n] = true
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if !hasTag || name == "" {
			name = f.Name
		}
		out[name] = true
	}
	return out
}

func TestOpenAPISchemasMatchGoTypes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	schemas := doc.Components.Schemas

	for _, name := range oaSortedKeys(oaSchemaTypes) {
		typ := oaSchemaTypes[name]
		t.Run(name, func(t *testing.T) {
			s, ok := schemas[name]
			if !ok {
				t.Fatalf("components.schemas.%s is missing (documents Go type %s)", name, typ)
			}
			want := oaJSONNames(typ)
			got := map[string]bool{}
			for p := range s.Properties {
				got[p] = true
			}
			for _, p := range oaSortedKeys(want) {
				if !got[p] {
					t.Errorf("schema %s lacks property %q (JSON field of %s)", name, p, typ)
				}
			}
			for _, p := range oaSortedKeys(got) {
				if !want[p] {
					t.Errorf("schema %s has property %q, which %s does not have", name, p, typ)
				}
			}
			for _, r := range s.Required {
				if !got[r] {
					t.Errorf("schema %s requires %q, which is not one of its properties", name, r)
				}
			}
		})
	}

	t.Run("every object schema has a Go type", func(t *testing.T) {
		for _, name := range oaSortedKeys(schemas) {
			s := schemas[name]
			if len(s.Properties) == 0 && s.Type != "object" {
				continue
			}
			if _, ok := oaSchemaTypes[name]; ok {
				continue
			}
			if _, ok := oaSchemasWithoutGoType[name]; ok {
				continue
			}
			t.Errorf("object schema %s is not mapped to a Go type in oaSchemaTypes (or listed in oaSchemasWithoutGoType)", name)
		}
		for _, name := range oaSortedKeys(oaSchemasWithoutGoType) {
			if _, ok := schemas[name]; !ok {
				t.Errorf("oaSchemasWithoutGoType lists %s, which is not in components.schemas", name)
			}
		}
	})

	for _, name := range oaSortedKeys(oaEnumValues) {
		want := slices.Clone(oaEnumValues[name])
		t.Run("enum "+name, func(t *testing.T) {
			s, ok := schemas[name]
			if !ok {
				t.Fatalf("components.schemas.%s is missing", name)
			}
			got := slices.Clone(s.Enum)
			sort.Strings(got)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				t.Errorf("schema %s enum = %v, want the Go values %v", name, got, want)
			}
		})
	}
}

func TestOpenAPIRefsResolve(t *testing.T) {
	_, raw := loadOpenAPI(t)
	var refs []string
	oaCollectRefs(raw, &refs)
	if len(refs) == 0 {
		t.Fatal("no $ref found; the document is not what this test expects")
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		if seen[ref] {
			continue
		}
		seen[ref] = true
		if err := oaResolvePointer(raw, ref); err != nil {
			t.Errorf("$ref %q: %v", ref, err)
		}
	}
}

func oaCollectRefs(v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if k == "$ref" {
				if s, ok := e.(string); ok {
					*out = append(*out, s)
				} else {
					*out = append(*out, fmt.Sprint(e))
				}
				continue
			}
			oaCollectRefs(e, out)
		}
	case []any:
		for _, e := range x {
			oaCollectRefs(e, out)
		}
	}
}

// oaResolvePointer follows a local JSON pointer reference ("#/a/b").
func oaResolvePointer(root map[string]any, ref string) error {
	ptr, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return fmt.Errorf("only local references (#/...) are allowed")
	}
	var cur any = root
	for _, tok := range strings.Split(ptr, "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return fmt.Errorf("%q is not inside an object", tok)
		}
		if cur, ok = m[tok]; !ok {
			return fmt.Errorf("%q not found", tok)
		}
	}
	return nil
}

// Each route takes exactly the query parameters its operation documents
// (access_token aside, which authentication takes out first): the server
// refuses the others, so the two lists must agree.
func TestOpenAPIQueryParamsMatchRoutes(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	ops := oaOperations(t, doc)
	for _, rt := range Routes() {
		key := oaRouteKey(rt)
		op, ok := ops[key]
		if !ok {
			continue // TestOpenAPIRoutesMatchServer reports it
		}
		var documented []string
		for _, p := range op.Parameters {
			if p.Ref != "" {
				p = doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			}
			if p.In == "query" && p.Name != "access_token" {
				documented = append(documented, p.Name)
			}
		}
		served := slices.Clone(rt.Query)
		slices.Sort(documented)
		slices.Sort(served)
		if !slices.Equal(documented, served) {
			t.Errorf("%s: the route takes query parameters %v, %s documents %v", key, served, openAPIFile, documented)
		}
	}
}
