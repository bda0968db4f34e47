package llamacpp

// WithMRoPE returns pr's chunks as a prompt of a projector that says
// M-RoPE (as a Qwen2-VL mmproj does), for the refusal of Inputs: no
// projector file of the M-RoPE family is written by the tests yet.
func WithMRoPE(pr *Prompt) *Prompt {
	p := &Projector{model: pr.p.model, path: pr.p.path, info: pr.p.info}
	p.info.MRoPE = true
	return &Prompt{Chunks: pr.Chunks, p: p}
}
