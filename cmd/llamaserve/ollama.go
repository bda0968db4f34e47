package main

import (
	"crypto/sha256"
	"fmt"
	"os"
	"strings"

	"github.com/llamaloop/llamaloop/internal/serve"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// modelDetails describe m, loaded from o.model, to Ollama's /api/tags,
// /api/show and /api/ps.
func modelDetails(m *llamacpp.Model, o *options) serve.ModelDetails {
	info := m.Info()
	d := serve.ModelDetails{Architecture: info.Architecture, Params: info.Params, ContextLength: info.CtxTrain,
		EmbeddingSize: info.Embd, Layers: info.Layers, Heads: info.Heads, HeadsKV: info.HeadsKV}
	// llama.cpp's description ends with the file type: "llama 1B Q8_0".
	if f := strings.Fields(info.Description); len(f) > 0 {
		d.Quantization = f[len(f)-1]
	}
	if st, err := os.Stat(o.model); err == nil {
		d.FileSize, d.ModifiedAt = st.Size(), st.ModTime().UTC()
		d.Digest = fmt.Sprintf("%x", sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", o.model, st.Size(), st.ModTime().UnixNano())))
	}
	// --chat-template's Jinja source or built-in name, or the model's.
	d.Template = o.template
	if d.Template == "" {
		d.Template, _ = m.ChatTemplate("")
	}
	return d
}
