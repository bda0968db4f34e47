package llamacpp

// WithMRoPE returns pr's chunks as a prompt of a projector that says
// M-RoPE (as a Qwen2-VL mmproj does), for the refusal of Positions of an
// image without its grid.
func WithMRoPE(pr *Prompt) *Prompt {
	p := &Projector{model: pr.p.model, path: pr.p.path, info: pr.p.info}
	p.info.MRoPE = true
	return &Prompt{Chunks: pr.Chunks, p: p}
}

// PromptOf is a prompt of chunks from a projector described by info (no
// projector loaded), for Positions.
func PromptOf(chunks []Chunk, info ProjectorInfo) *Prompt {
	return &Prompt{Chunks: chunks, p: &Projector{info: info}}
}
