package serve

import (
	"encoding/json"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/chat"
)

// chatMessage is a message of the history, every API's messages mapped
// onto internal/chat's.
type chatMessage = chat.Message

// templateMessages writes the messages as the chat template reads them
// (chat.TemplateMessages).
func templateMessages(msgs []chatMessage) []byte { return chat.TemplateMessages(msgs) }

// polyfill writes the messages for a template that knows no tools
// (describe) or no calls (rewrite), as chat.Polyfill does, with tp's
// tools (none when nil).
func polyfill(msgs []chatMessage, tp *toolPlan, describe, rewrite bool) []chatMessage {
	var tools []json.RawMessage
	if tp != nil {
		tools = tp.raw
	}
	return chat.Polyfill(msgs, tools, describe, rewrite)
}

// builtinMessages writes the messages for llama.cpp's built-in templates,
// which know neither tools nor calls.
func builtinMessages(msgs []chatMessage, tp *toolPlan) []backend.Message {
	var out []backend.Message
	for _, m := range polyfill(msgs, tp, true, true) {
		out = append(out, backend.Message{Role: m.Role, Content: m.Content})
	}
	return out
}
