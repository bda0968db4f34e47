package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// ChatTemplate is a model's Jinja chat template (tokenizer.chat_template),
// rendered as transformers' apply_chat_template and llama.cpp's minja do:
// with messages, tools, add_generation_prompt, bos_token, eos_token and
// raise_exception (and strftime_now).
type ChatTemplate struct {
	tmpl     *jinja.Template
	bos, eos string
	family   toolFamily
	// takesTools and takesCalls tell whether the template reads tools and
	// the assistants' tool_calls: the server writes them into the
	// messages for one that does not.
	takesTools, takesCalls bool
}

// NewChatTemplate compiles src, a Jinja chat template; bos and eos are the
// texts of the model's BOS and EOS tokens.
func NewChatTemplate(src, bos, eos string) (*ChatTemplate, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, err
	}
	ct := &ChatTemplate{tmpl: t, bos: bos, eos: eos, family: familyOf(src),
		takesTools: strings.Contains(src, "tools"), takesCalls: strings.Contains(src, "tool_calls")}
	if !ct.takesTools {
		ct.family = familyJSON // it asks for calls as polyfill describes them
	}
	return ct, nil
}

// IsJinja reports whether text looks like a Jinja template rather than the
// name of one of llama.cpp's built-in templates (chatml, llama3, ...).
func IsJinja(text string) bool {
	return strings.Contains(text, "{{") || strings.Contains(text, "{%")
}

// TakesTools reports whether the template renders tools itself; for one
// that does not, the server describes them in the system message.
func (t *ChatTemplate) TakesTools() bool { return t.takesTools }

// Family names the tool-call format the template's model writes: hermes
// (<tool_call>), llama3 (a JSON object with "parameters", maybe after
// <|python_tag|>), mistral ([TOOL_CALLS]) or json.
func (t *ChatTemplate) Family() string { return string(t.family) }

// render renders the chat: messages and tools are JSON values (the
// message objects and tool objects of OpenAI's API, rewritten by
// templateMessages), read keeping their keys' order, which tojson
// preserves as Python's json.dumps does.
func (t *ChatTemplate) render(messages, tools []byte, addGenerationPrompt bool) (string, error) {
	msgs, err := jsonValue(messages)
	if err != nil {
		return "", err
	}
	data := map[string]jinja.Value{
		"messages":              msgs,
		"add_generation_prompt": jinja.NewBool(addGenerationPrompt),
		"bos_token":             jinja.NewString(t.bos),
		"eos_token":             jinja.NewString(t.eos),
	}
	if tools != nil {
		v, err := jsonValue(tools)
		if err != nil {
			return "", err
		}
		data["tools"] = v
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", err
	}
	return out, nil
}

// jsonValue reads a JSON document as a Jinja value; objects keep their
// keys' order.
func jsonValue(data []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return jinja.Value{}, errors.New("more than one JSON value")
	}
	return v, nil
}

// maxTemplateDepth bounds the nesting of the values a template reads: a
// template that recurses over them (Hermes' over a tool's schema) keeps to
// a bounded stack.
const maxTemplateDepth = 64

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxTemplateDepth {
		return jinja.Value{}, fmt.Errorf("values nested deeper than %d levels", maxTemplateDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch x := tok.(type) {
	case json.Delim:
		switch x {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(k.(string), v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			return d, nil
		case '[':
			var items []jinja.Value
			for dec.More() {
				v, err := decodeValue(dec, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			if _, err := dec.Token(); err != nil {
				return jinja.Value{}, err
			}
			if items == nil {
				items = []jinja.Value{}
			}
			return jinja.NewList(items), nil
		}
	case string:
		return jinja.NewString(x), nil
	case bool:
		return jinja.NewBool(x), nil
	case nil:
		return jinja.None(), nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return jinja.NewInt(i), nil
		}
		f, err := x.Float64()
		if err != nil {
			return jinja.Value{}, err
		}
		return jinja.NewFloat(f), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}
