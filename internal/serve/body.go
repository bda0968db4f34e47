package serve

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/internal/quote"
)

// fieldTable says what an endpoint does with each field of its body: one
// decoder (decode) serves every endpoint.
type fieldTable struct {
	// read are the fields the endpoint implements, decoded into its
	// request.
	read []string
	// ignored change nothing here, whatever their value.
	ignored []string
	// checked are accepted when they ask for nothing the server lacks
	// (null always is); each check returns the reason of a refusal.
	checked map[string]func(raw json.RawMessage) string
	// config says the endpoint takes the transformers GenerationConfig
	// fields (configFields) as extensions.
	config bool
	// other are the fields of a sibling endpoint, refused as such.
	other []string
}

// decode checks body's fields against the table, in the body's order
// (the first field unknown or refused is named), and decodes it into req;
// the GenerationConfig fields go to config.
func (t *fieldTable) decode(body []byte, req any, config map[string]json.RawMessage) error {
	if !utf8.Valid(body) {
		return badRequest("", "the body is not valid UTF-8")
	}
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&fields); err != nil {
		return badRequest("", "the body is not a JSON object: %v", err)
	}
	if dec.More() {
		return badRequest("", "the body holds more than one JSON value")
	}
	if fields == nil {
		return badRequest("", "the body is not a JSON object")
	}
	keys, err := objectKeys(body)
	if err != nil {
		return badRequest("", "the body is not a JSON object: %v", err)
	}
	for _, k := range keys {
		v := bytes.TrimSpace(fields[k])
		switch {
		case slices.Contains(t.read, k), slices.Contains(t.ignored, k):
		case t.config && slices.Contains(configFields, k):
			config[k] = v
		case t.checked[k] != nil:
			if string(v) == "null" {
				continue
			}
			if why := t.checked[k](v); why != "" {
				return badRequest(k, "%s", why)
			}
		case slices.Contains(t.other, k):
			return badRequest(quote.Value(k), "field %s belongs to the other endpoint", quote.String(k))
		default:
			return badRequest(quote.Value(k), "unknown field %s", quote.String(k))
		}
	}
	if err := unmarshalFields(body, req); err != nil {
		return err
	}
	return nil
}

// The tables of the endpoints.
var (
	completionsTable = &fieldTable{read: slices.Concat(commonFields, completionFields), config: true,
		other: slices.Concat(chatFields, ignoredChatFields, slices.Collect(maps.Keys(checkedChatFields)))}
	chatTable = &fieldTable{read: slices.Concat(commonFields, chatFields), ignored: ignoredChatFields,
		checked: checkedChatFields, config: true, other: completionFields}
	responsesTable = &fieldTable{read: responsesFields, ignored: ignoredResponsesFields,
		checked: checkedResponsesFields, config: true}
)
