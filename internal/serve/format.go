package serve

import (
	"bytes"
	"encoding/json"
	"sync"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/grammar"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/logits"
)

// responseFormat is OpenAI's response_format: "text", "json_object" (any
// JSON value... of type object, as OpenAI has it) or "json_schema" with a
// JSON Schema.
type responseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *jsonSchema `json:"json_schema"`
}

type jsonSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// jsonObjectSchema is json_object's constraint: a JSON object, whatever
// its keys.
const jsonObjectSchema = `{"type":"object","additionalProperties":true}`

// formatBudget bounds the memory of the kept matchers: past it they are
// dropped, and the next requests build them again.
const formatBudget = 256 << 20

// formats turns response formats into grammar processors. The vocabulary
// is read from the tokenizer once, at the first constrained request (it
// takes a fraction of a second at 128k tokens); a matcher is kept per
// schema, since a server meets the same few schemas again and again and
// a warm matcher's masks cost microseconds.
type formats struct {
	tok            backend.Tokenizer
	vocab          int
	maxSchemaBytes int

	once   sync.Once
	voc    *grammar.Vocabulary
	vocErr error

	mu       sync.Mutex
	matchers map[string]*grammar.Matcher

	// building, when set (by tests), is called before a grammar is built.
	building func()
}

// processor returns the grammar processor of rf; nil for text.
func (f *formats) processor(rf *responseFormat) (logits.Processor, error) {
	if rf == nil {
		return nil, nil
	}
	var schema []byte
	switch rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		schema = []byte(jsonObjectSchema)
	case "json_schema":
		if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
			return nil, badRequest("response_format", "response_format json_schema needs json_schema.schema")
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, rf.JSONSchema.Schema); err != nil {
			return nil, badRequest("response_format", "response_format: the schema is not JSON: %v", err)
		}
		if limit := (Limits{MaxSchemaBytes: f.maxSchemaBytes}).withDefaults().MaxSchemaBytes; compact.Len() > limit {
			return nil, schemaTooLarge("response_format", "response_format", compact.Len(), limit)
		}
		schema = compact.Bytes()
	default:
		return nil, badRequest("response_format", "response_format type %s: want text, json_object or json_schema", quote.String(rf.Type))
	}
	if f.tok == nil {
		return nil, badRequest("response_format", "response_format needs the model's tokenizer, which this server lacks")
	}
	m, err := f.matcher(schema)
	if err != nil {
		return nil, err
	}
	return grammar.NewProcessor(m), nil
}

// matcher returns the kept matcher of schema, building it when new.
func (f *formats) matcher(schema []byte) (*grammar.Matcher, error) {
	return f.kept(string(schema), func() (*grammar.Grammar, error) {
		g, err := grammar.FromJSONSchema(schema)
		if err != nil {
			return nil, badRequest("response_format", "response_format: %v", err)
		}
		return g, nil
	})
}

// gbnfProcessor returns the processor of the GBNF grammar src (a tool
// call's).
func (f *formats) gbnfProcessor(src string) (logits.Processor, error) {
	return f.gbnf(src, "tool_choice", "tools", "the call's grammar")
}

// gbnf returns the processor of the GBNF grammar src; the errors name
// need, the field that asks for a grammar, and param and what, the field
// that holds it and what it is.
func (f *formats) gbnf(src, need, param, what string) (logits.Processor, error) {
	if f.tok == nil {
		return nil, badRequest(need, "%s needs the model's tokenizer, which this server lacks", need)
	}
	m, err := f.kept("gbnf:"+src, func() (*grammar.Grammar, error) {
		g, err := grammar.Parse(src)
		if err != nil {
			return nil, badRequest(param, "%s: %s cannot be built: %v", param, what, err)
		}
		return g, nil
	})
	if err != nil {
		return nil, err
	}
	return grammar.NewProcessor(m), nil
}

// kept returns the matcher kept under key, building its grammar when new.
// The grammar is built without the lock: a request whose schema takes long
// to compile does not hold up the requests of other schemas.
func (f *formats) kept(key string, build func() (*grammar.Grammar, error)) (*grammar.Matcher, error) {
	f.once.Do(func() { f.voc, f.vocErr = grammar.VocabularyFrom(f.tok, f.vocab) })
	if f.vocErr != nil {
		return nil, f.vocErr
	}
	f.mu.Lock()
	var g *grammar.Grammar
	if m, ok := f.matchers[key]; ok {
		// Half-way to its budget, a kept matcher is replaced for the requests to come: one
		// request that grew it (deep nesting, an ambiguous grammar) does not leave the next
		// ones of the same schema without room. The requests that hold it keep it.
		if m.Footprint() < grammar.DefaultMaxBytes/2 {
			f.mu.Unlock()
			return m, nil
		}
		g = m.Grammar()
	}
	f.mu.Unlock()
	if g == nil {
		if f.building != nil {
			f.building()
		}
		var err error
		if g, err = build(); err != nil {
			return nil, err
		}
	}
	m := grammar.NewMatcher(g, f.voc)
	f.mu.Lock()
	defer f.mu.Unlock()
	total := 0
	for _, m := range f.matchers {
		total += m.Footprint()
	}
	if f.matchers == nil || total > formatBudget {
		f.matchers = map[string]*grammar.Matcher{}
	}
	f.matchers[key] = m
	return m, nil
}
