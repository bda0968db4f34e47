package serve

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// The chat page's files, served at / (index.html) and /ui/.
//
//go:embed webui/*
var webuiFiles embed.FS

// pageCSP is the chat page's Content-Security-Policy: its own scripts,
// styles and API only. No inline script runs, so even text that escaped
// the page's renderer as markup could not execute; nothing loads from
// another origin, so the page works offline.
const pageCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pagePath reports whether p is one of the page's files, which answer
// without the API key (the page asks for it; the files hold no secret).
func pagePath(p string) bool { return p == "/" || strings.HasPrefix(p, "/ui/") }

// page serves the chat page's files: / is index.html, /ui/NAME the others.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	name := "index.html"
	if r.URL.Path != "/" {
		name = strings.TrimPrefix(r.URL.Path, "/ui/")
	}
	data, err := fs.ReadFile(webuiFiles, "webui/"+name)
	if err != nil || strings.Contains(name, "/") {
		writeError(w, &requestError{status: http.StatusNotFound, code: "not_found", msg: "no page file " + r.URL.Path})
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", pageCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	switch path.Ext(name) {
	case ".html":
		h.Set("Content-Type", "text/html; charset=utf-8")
	case ".js":
		h.Set("Content-Type", "text/javascript; charset=utf-8")
	case ".css":
		h.Set("Content-Type", "text/css; charset=utf-8")
	}
	if r.Method != http.MethodHead {
		w.Write(data)
	}
}

// propsObject is the answer of /props: the model, the tokens a sequence
// holds, and the generation config a request starts from (the fields the
// chat page's settings show), under llama.cpp's server's names.
type propsObject struct {
	Model    string        `json:"model"`
	NCtx     int           `json:"n_ctx"`
	Defaults propsDefaults `json:"default_generation_settings"`
}

type propsDefaults struct {
	DoSample          bool     `json:"do_sample"`
	Temperature       float64  `json:"temperature"`
	TopP              float64  `json:"top_p"`
	TopK              int      `json:"top_k"`
	MinP              *float64 `json:"min_p"`
	TypicalP          float64  `json:"typical_p"`
	RepetitionPenalty float64  `json:"repetition_penalty"`
	PresencePenalty   float64  `json:"presence_penalty"`
	FrequencyPenalty  float64  `json:"frequency_penalty"`
	MaxTokens         int      `json:"max_tokens"`
	Stop              []string `json:"stop"`
	Mirostat          int      `json:"mirostat"`
	MirostatTau       float64  `json:"mirostat_tau"`
	MirostatEta       float64  `json:"mirostat_eta"`
}

// props answers GET /props.
func (s *Server) props(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	b := s.params.base
	maxTokens := s.cfg.SequenceSize // a chat reply's default: the end of its sequence
	if b.MaxNewTokens != nil {
		maxTokens = *b.MaxNewTokens
	}
	temp := b.Temperature
	if !b.DoSample {
		temp = 0 // greedy, as the API's temperature 0 says
	}
	writeJSON(w, http.StatusOK, propsObject{Model: s.cfg.ModelID, NCtx: s.cfg.SequenceSize, Defaults: propsDefaults{
		DoSample: b.DoSample, Temperature: temp, TopP: b.TopP, TopK: b.TopK, MinP: b.MinP, TypicalP: b.TypicalP,
		RepetitionPenalty: b.RepetitionPenalty, MaxTokens: maxTokens, Stop: b.StopStrings,
		MirostatTau: 5, MirostatEta: 0.1,
	}})
}
