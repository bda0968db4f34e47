package generation

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"

	"github.com/llamaloop/llamaloop/mirostat"
)

// RequestState is the generation state of a running request between two of
// its tokens: with the same Request, it lets [Generator.Resume] continue
// the request, in this process or another, with exactly the tokens it
// would have produced.
//
// The processors' states (repetition penalties, no-repeat n-grams, the
// grammar of a user processor, the length rules) are functions of the
// prompt and the tokens accepted so far, so Resume rebuilds them by
// accepting Tokens again; a user processor whose state depends on anything
// else is not restored. The draws continue from Source, and Mirostat from
// its feedback state.
//
// The backend's slot is not part of it. Resume feeds the prompt and the
// tokens into an empty slot; over a prefixcache.Cache that holds the
// sequence (the slot the request left, or a state loaded with Adopt) only
// the last token is evaluated. A request with PromptEmbeddings (an image)
// is resumed with them given again: the state holds their digest, and
// Resume refuses other ones.
type RequestState struct {
	// Prompt is the prompt as evaluated (Generator.PromptTokens).
	Prompt []int32
	// Tokens are the tokens generated so far.
	Tokens []int32
	// Sent is how many bytes of the text of Tokens the events carried
	// (the rest was held back inside a UTF-8 character).
	Sent int
	// Source is the state of the request's draws (logits.Source's
	// MarshalBinary).
	Source []byte
	// Mirostat is the Mirostat feedback state of a Mirostat request.
	Mirostat *mirostat.State
	// Embeddings is a SHA-256 of the request's PromptEmbeddings (each
	// embedding's position, width and values), empty when it has none.
	Embeddings []byte
}

// State returns the state of request (its index in the requests given to
// Stream or Resume) as it stands after its latest event. Call it while a
// Stream or Resume of g is being iterated, from the loop body, for a
// request that has not finished.
func (g *Generator) State(request int) (*RequestState, error) {
	if !g.busy {
		return nil, errors.New("generation: State outside the iteration of a stream")
	}
	for _, r := range g.active {
		if r.index != request || r.done {
			continue
		}
		if len(r.tokens) == 0 {
			return nil, fmt.Errorf("generation: request %d has no token yet", request)
		}
		if r.spec == specDraft && r.cfg.DoSample && r.req.Mirostat == nil {
			return nil, fmt.Errorf("generation: request %d samples with a draft model, whose draws a state does not hold", request)
		}
		src, err := r.src.MarshalBinary()
		if err != nil {
			return nil, err
		}
		st := &RequestState{
			Prompt:     slices.Clone(r.hist.Prompt()),
			Tokens:     slices.Clone(r.tokens),
			Sent:       r.sent,
			Source:     src,
			Embeddings: embeddingsDigest(r.req.PromptEmbeddings),
		}
		if m, ok := r.choose.(mirostatChooser); ok {
			ms := m.s.State()
			st.Mirostat = &ms
		}
		return st, nil
	}
	return nil, fmt.Errorf("generation: request %d is not running", request)
}

// Resume is Stream for requests of which some continue from a state:
// states[i], when not nil, is the state of reqs[i] that State returned,
// given again with the same request (prompt, config, processors, seed
// and settings). Such a request's events and result hold only the tokens
// generated after the state; its lengths still count from its prompt (a
// request saved after 5 tokens with max_new_tokens 20 makes 15 more).
func (g *Generator) Resume(ctx context.Context, reqs []Request, states []*RequestState) iter.Seq2[Event, error] {
	if len(states) != len(reqs) {
		return func(yield func(Event, error) bool) {
			yield(Event{}, fmt.Errorf("generation: %d states for %d requests", len(states), len(reqs)))
		}
	}
	return g.stream(ctx, reqs, states)
}

// restore puts st into r, which prepare made from the same request.
func (g *Generator) restore(r *seq, st *RequestState) error {
	if !slices.Equal(st.Prompt, r.prompt) {
		return fmt.Errorf("the state's prompt (%d tokens) is not the request's (%d tokens)", len(st.Prompt), len(r.prompt))
	}
	switch d := embeddingsDigest(r.embd); {
	case len(st.Embeddings) == 0 && d != nil:
		return errors.New("the request has PromptEmbeddings, the state none")
	case !bytes.Equal(st.Embeddings, d):
		return errors.New("the state's prompt embeddings (its media) are not the request's")
	}
	if len(st.Tokens) == 0 {
		return errors.New("the state has no token")
	}
	if len(st.Tokens) >= r.maxNew {
		return fmt.Errorf("the state holds %d tokens, max_length leaves %d", len(st.Tokens), r.maxNew)
	}
	_, isMirostat := r.choose.(mirostatChooser)
	if isMirostat != (st.Mirostat != nil) {
		return errors.New("the request and the state differ in Mirostat")
	}
	for i, t := range st.Tokens {
		if t < 0 || int(t) >= g.vocab {
			return fmt.Errorf("token %d: %d not in [0,%d)", i, t, g.vocab)
		}
		if r.isEOS(t) {
			return fmt.Errorf("token %d is a stop token: the request had finished", i)
		}
	}
	if err := r.src.UnmarshalBinary(st.Source); err != nil {
		return fmt.Errorf("random source: %w", err)
	}
	if st.Mirostat != nil {
		if err := r.choose.(mirostatChooser).s.SetState(*st.Mirostat); err != nil {
			return err
		}
	}
	for _, t := range st.Tokens {
		r.hist.Accept(t)
		r.tokens = append(r.tokens, t)
		if g.tok != nil {
			var err error
			if r.text, err = g.tok.AppendPiece(r.text, t, r.req.RenderSpecial); err != nil {
				return fmt.Errorf("piece of token %d: %w", t, err)
			}
		}
	}
	if st.Sent < 0 || st.Sent > len(r.text) {
		return fmt.Errorf("the state sent %d bytes of a text of %d", st.Sent, len(r.text))
	}
	r.sent = st.Sent
	// The slot is empty at admission: the whole sequence is fed, and the
	// last token's logits choose the next one.
	r.prompt = append(r.prompt, st.Tokens...)
	if r.embd != nil {
		r.embd = append(slices.Clip(r.embd), make([][]float32, len(st.Tokens))...)
	}
	return nil
}

// embeddingsDigest is the SHA-256 of embd, each entry's position, width
// and values; nil for nil.
func embeddingsDigest(embd [][]float32) []byte {
	if embd == nil {
		return nil
	}
	h := sha256.New()
	var buf []byte
	for i, e := range embd {
		if e == nil {
			continue
		}
		buf = binary.LittleEndian.AppendUint64(buf[:0], uint64(i))
		buf = binary.LittleEndian.AppendUint64(buf, uint64(len(e)))
		for _, v := range e {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
		}
		h.Write(buf)
	}
	binary.Write(h, binary.LittleEndian, uint64(len(embd)))
	return h.Sum(nil)
}

// stateVersion is the version of RequestState's binary form; version 1,
// which had no Embeddings, is read too.
const stateVersion = 2

// MarshalBinary encodes st: a version byte, then little-endian fields.
func (st *RequestState) MarshalBinary() ([]byte, error) {
	b := []byte{stateVersion}
	b = appendTokens(b, st.Prompt)
	b = appendTokens(b, st.Tokens)
	b = binary.LittleEndian.AppendUint64(b, uint64(st.Sent))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.Source)))
	b = append(b, st.Source...)
	if st.Mirostat == nil {
		b = append(b, 0)
	} else {
		b = append(b, 1)
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(st.Mirostat.Mu))
		b = binary.LittleEndian.AppendUint64(b, uint64(st.Mirostat.Steps))
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(st.Embeddings)))
	return append(b, st.Embeddings...), nil
}

func appendTokens(b []byte, toks []int32) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(len(toks)))
	for _, t := range toks {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

// UnmarshalBinary decodes what MarshalBinary wrote; it fails on a short,
// long or newer encoding without changing st.
func (st *RequestState) UnmarshalBinary(data []byte) error {
	d := decoder{b: data}
	v := d.byte()
	if d.err == nil && (v < 1 || v > stateVersion) {
		return fmt.Errorf("generation: request state version %d, want 1 to %d", v, stateVersion)
	}
	var out RequestState
	out.Prompt = d.tokens()
	out.Tokens = d.tokens()
	sent := d.uint64()
	out.Source = d.bytes(int(d.uint32()))
	if d.byte() == 1 {
		mu := math.Float64frombits(d.uint64())
		steps := d.uint64()
		out.Mirostat = &mirostat.State{Mu: mu, Steps: int(min(steps, math.MaxInt32))}
	}
	if v >= 2 {
		if n := int(d.uint32()); n > 0 {
			out.Embeddings = d.bytes(n)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d bytes too many", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("generation: request state: %w", d.err)
	}
	out.Sent = int(min(sent, math.MaxInt32))
	*st = out
	return nil
}

// decoder reads little-endian fields and remembers the first shortfall.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errors.New("truncated")
		return nil
	}
	out := slices.Clone(d.b[:n])
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) uint32() uint32 {
	if b := d.bytes(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) uint64() uint64 {
	if b := d.bytes(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) tokens() []int32 {
	n := int(d.uint32())
	if d.err == nil && n > len(d.b)/4 {
		d.err = errors.New("truncated")
	}
	raw := d.bytes(4 * n)
	if d.err != nil {
		return nil
	}
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return toks
}
