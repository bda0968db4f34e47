package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/clicommon"
)

// prompt is one prompt as the user gave it: text, or chat messages.
type prompt struct {
	Text     string
	Messages []backend.Message
}

// label is a one-line description of the prompt for output headers.
func (p prompt) label() string {
	s := p.Text
	if len(p.Messages) > 0 {
		s = p.Messages[len(p.Messages)-1].Content
	}
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		s = string(r[:57]) + "..."
	}
	return s
}

// request turns the prompt into a generation request; chat wraps a text
// prompt in a user message (after the system message, if any).
// parseSpecial reads control-token text in the prompt as those tokens.
func (p prompt) request(chat bool, system string, parseSpecial bool) generation.Request {
	switch {
	case len(p.Messages) > 0:
		return generation.Request{Messages: p.Messages, ParseSpecial: parseSpecial}
	case chat:
		var msgs []backend.Message
		if system != "" {
			msgs = append(msgs, backend.Message{Role: "system", Content: system})
		}
		return generation.Request{Messages: append(msgs, backend.Message{Role: "user", Content: p.Text}), ParseSpecial: parseSpecial}
	}
	return generation.Request{Text: p.Text, ParseSpecial: parseSpecial}
}

// readPrompts reads a --prompts file: one prompt per non-empty line, each
// plain text, a JSON string, or a JSON object {"prompt": "..."} or
// {"messages": [{"role": ..., "content": ...}, ...]}.
func readPrompts(r io.Reader) ([]prompt, error) {
	var out []prompt
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" {
			continue
		}
		p, err := parsePromptLine(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		out = append(out, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, errors.New("no prompt in the file")
	}
	return out, nil
}

func parsePromptLine(line string) (prompt, error) {
	trimmed := strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(trimmed, `"`):
		var s string
		if err := json.Unmarshal([]byte(trimmed), &s); err != nil {
			return prompt{}, fmt.Errorf("invalid JSON string: %v", err)
		}
		return prompt{Text: s}, nil
	case strings.HasPrefix(trimmed, "{"):
		var obj struct {
			Prompt   *string           `json:"prompt"`
			Messages []backend.Message `json:"messages"`
		}
		dec := json.NewDecoder(strings.NewReader(trimmed))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil {
			return prompt{}, fmt.Errorf("invalid JSON object: %v", err)
		}
		switch {
		case obj.Prompt != nil && obj.Messages != nil:
			return prompt{}, errors.New(`give "prompt" or "messages", not both`)
		case obj.Prompt != nil:
			return prompt{Text: *obj.Prompt}, nil
		case len(obj.Messages) > clicommon.MaxChatMessages:
			return prompt{}, fmt.Errorf("%d messages: at most %d", len(obj.Messages), clicommon.MaxChatMessages)
		case len(obj.Messages) > 0:
			for i, m := range obj.Messages {
				if m.Role == "" {
					return prompt{}, fmt.Errorf("message %d has no role", i)
				}
			}
			return prompt{Messages: obj.Messages}, nil
		}
		return prompt{}, errors.New(`the object needs "prompt" or "messages"`)
	}
	return prompt{Text: line}, nil
}
