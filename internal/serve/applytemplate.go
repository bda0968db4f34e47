package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/internal/chat"
)

// applyTemplate serves POST /apply-template (llama-server's endpoint): the
// body of a chat completions request, whose messages and tools are
// rendered as the prompt the server would generate from, returned as
// {"prompt": text} with the X-Chat-Template header naming the template
// that rendered it (jinja, or builtin: llama.cpp's, for a model without a
// Jinja template or when it fails). It is bounded as a chat request is:
// the body's size, a sequence counted against MaxConcurrent while it
// renders, the template's limits; the fields that only shape the
// generation are accepted and not read.
func (s *Server) applyTemplate(w http.ResponseWriter, r *http.Request) {
	body := s.readBody(w, r)
	if body == nil {
		return
	}
	h := s.hold(w, 1)
	if h == nil {
		return
	}
	defer h.release()
	req, err := decodeRequest(body, true)
	if err == nil {
		var text, tmpl string
		ctx, done := s.planContext(r)
		text, tmpl, err = s.params.chatText(ctx, req)
		done()
		if err == nil {
			// The prompt as it is: its markers (<|im_start|>) are not
			// escaped as HTML.
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err = enc.Encode(map[string]string{"prompt": text}); err == nil {
				w.Header().Set("X-Chat-Template", tmpl)
				s.writeReply(w, b.Bytes())
				return
			}
		}
	}
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{status: http.StatusInternalServerError, msg: err.Error()}
	}
	writeError(w, re)
}

// chatText renders the chat of req as chatPrompt does, as text: the Jinja
// template with the tools and chat_template_kwargs' thinking switch, or llama.cpp's built-in template (the tools
// described in the system message) when there is none or it fails; it
// names the template that ran.
func (p *params) chatText(ctx context.Context, req *apiRequest) (text, template string, err error) {
	msgs, err := parseMessages(req.Messages, &mediaReader{limits: p.limits, media: p.media})
	if err != nil {
		return "", "", err
	}
	tp, err := parseTools(req, p.limits)
	if err != nil {
		return "", "", err
	}
	thinking, err := req.templateThinking()
	if err != nil {
		return "", "", err
	}
	if p.chat != nil {
		var tools []byte
		if tp != nil && p.chat.takesTools {
			tools = tp.toolsJSON()
		}
		shown := msgs
		if !p.chat.takesTools || !p.chat.takesCalls {
			shown = polyfill(msgs, tp, !p.chat.takesTools, !p.chat.takesCalls)
		}
		text, err := p.chat.renderWith(ctx, templateMessages(shown), tools, chat.RenderOptions{AddGenerationPrompt: true, Thinking: thinking})
		if err == nil {
			return text, "jinja", nil
		}
		if re := templateError(err); re != nil {
			return "", "", re
		}
		if p.logf != nil {
			p.logf("chat template: %v; rendering with llama.cpp's built-in template instead", err)
		}
	}
	ct, ok := p.tok.(backend.ChatTemplater)
	if !ok {
		return "", "", &requestError{status: http.StatusNotImplemented, msg: "the model has no chat template"}
	}
	text, err = ct.ApplyChatTemplate(builtinMessages(msgs, tp), true)
	if err != nil {
		return "", "", badRequest("messages", "llama.cpp's chat template: %v", err)
	}
	return text, "builtin", nil
}
