package generation

import (
	"context"
	"errors"
	"fmt"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/speculative"
)

// specKind is how a request speculates (the package documentation's
// Speculative decoding).
type specKind uint8

const (
	specNone specKind = iota
	specLookup
	specDraft
)

// Options are the settings of a Generator beyond its backend and tokenizer.
type Options struct {
	// Draft is the draft model (transformers' assistant_model), over the
	// target's vocabulary with at least as many slots: its slot i drafts
	// for the target's slot i. Every request whose config does not ask for
	// prompt lookup then speculates with it.
	Draft backend.Backend
}

// New returns a generator over b and tok (see NewGenerator) with opts. It
// fails when the draft model does not fit the backend.
func New(b backend.Backend, tok backend.Tokenizer, opts Options) (*Generator, error) {
	g := NewGenerator(b, tok)
	if opts.Draft == nil {
		return g, nil
	}
	d, err := speculative.NewDraft(opts.Draft, g.vocab)
	if err != nil {
		return nil, err
	}
	if d.Slots() < b.Slots() {
		return nil, fmt.Errorf("generation: the draft model has %d slots, the backend %d", d.Slots(), b.Slots())
	}
	g.draft = d
	return g, nil
}

// speculation returns how req, with its resolved config, speculates.
func (g *Generator) speculation(req *Request, cfg *genconfig.Config) (specKind, error) {
	kind := specNone
	switch {
	case cfg.PromptLookup():
		kind = specLookup
	case g.draft != nil:
		kind = specDraft
	default:
		return specNone, nil
	}
	switch {
	case g.enc != nil:
		return specNone, errors.New("speculative decoding of an encoder-decoder model is not supported")
	case req.PromptEmbeddings != nil && kind == specDraft:
		// The candidates of prompt lookup come from the history's tokens and
		// are verified by the model itself, so they need nothing more.
		return specNone, errors.New("speculative decoding with a draft model and PromptEmbeddings (media): the draft model cannot read the prompt's embeddings, which are in the model's input space; prompt lookup (prompt_lookup_num_tokens) speculates without it")
	case req.PromptPositions != nil && kind == specDraft:
		// Prompt lookup's candidates are text, fed after the prompt at the
		// slot's next position (withCandidatePos), and verified by the
		// model itself.
		return specNone, errors.New("speculative decoding with a draft model and PromptPositions (M-RoPE): the draft model reads the prompt at one position per token, not at the model's M-RoPE positions, and cannot read an image's embeddings; prompt lookup (prompt_lookup_num_tokens) speculates without it")
	case g.all == nil:
		return specNone, errors.New("speculative decoding needs a backend that keeps every position's logits (backend.AllLogits)")
	}
	return kind, nil
}

// propose sets the candidates of every speculating request fed its last
// token, and appends them to its feed.
func (g *Generator) propose(ctx context.Context) error {
	g.props, g.hists, g.limits = g.props[:0], g.hists[:0], g.limits[:0]
	for _, r := range g.fedSeqs {
		r.prop.Tokens = r.prop.Tokens[:0]
		if r.spec == specNone || r.nfed < r.promptEnd() {
			continue
		}
		// The candidates and the target's token stay within max_length
		// and the slot's room.
		limit := min(r.maxNew-len(r.tokens)-1, g.backend.Room(r.slot)-1)
		if r.spec == specLookup {
			r.prop.Tokens = speculative.Lookup(r.prop.Tokens, r.hist.Tokens(), r.cfg, limit, r.eos)
			continue
		}
		g.props, g.hists, g.limits = append(g.props, &r.prop), append(g.hists, r.hist), append(g.limits, limit)
	}
	if len(g.props) > 0 {
		if err := g.draft.Propose(ctx, g.props, g.hists, g.limits); err != nil {
			return fmt.Errorf("generation: %w", err)
		}
	}
	for i, r := range g.fedSeqs {
		if len(r.prop.Tokens) > 0 {
			r.feed = append(append(r.feed[:0], g.feeds[i].Tokens...), r.prop.Tokens...)
			g.feeds[i].Tokens = r.feed
			g.feeds[i].Embd = r.withCandidates(g.feeds[i].Embd, len(r.prop.Tokens))
			g.feeds[i].Pos = r.withCandidatePos(g.feeds[i].Pos, len(r.prop.Tokens))
			g.verifying = true
		}
	}
	return nil
}

// steps runs the per-token step of r, fed as feeds[i] in the last
// evaluation: once, or for each position of its candidates until one is
// rejected or r ends. It reports false when emit stopped the loop.
func (g *Generator) steps(r *seq, i int, emit func(*seq, Event) bool) bool {
	n := len(r.prop.Tokens)
	if n == 0 {
		return emit(r, g.step(r, g.backend.Logits(i), 0))
	}
	r.accepted = 0
	for j := 0; j <= n; j++ {
		scores := g.all.LogitsAt(i, j)
		if scores == nil {
			return emit(r, r.end(FinishError, fmt.Errorf("generation: the backend kept no logits at position %d of the feed", j)))
		}
		ev := g.step(r, scores, j)
		if !emit(r, ev) {
			return false
		}
		if r.done || !ev.Accepted {
			break
		}
		r.accepted++
	}
	return true
}

// settle makes the target's slot of every request that verified candidates
// forget the rejected ones, and its draft's slot follow; after every
// request's steps, since a Truncate ends the validity of the logits.
func (g *Generator) settle() error {
	if !g.verifying {
		return nil
	}
	for _, r := range g.fedSeqs {
		if r.done || len(r.prop.Tokens) == 0 {
			continue
		}
		if r.accepted < len(r.prop.Tokens) {
			if err := g.backend.Truncate(r.slot, r.hist.Len()-1); err != nil {
				return fmt.Errorf("generation: truncate slot %d: %w", r.slot, err)
			}
		}
		if r.spec == specDraft {
			if err := g.draft.Settle(&r.prop, r.accepted); err != nil {
				return fmt.Errorf("generation: %w", err)
			}
		}
	}
	return nil
}

// promptEnd is how much of r's prompt its prompt steps evaluate: all of it,
// but the last token for a speculating request, whose first step then
// verifies candidates after it. A prompt of one token is evaluated whole,
// so that a verification never starts an empty slot (where a prefix cache
// could take candidates from an entry, which then have no logits).
func (r *seq) promptEnd() int {
	if r.spec != specNone && len(r.prompt) > 1 {
		return len(r.prompt) - 1
	}
	return len(r.prompt)
}

// leviathan reports whether the token at position j of r's feed is chosen
// by speculative sampling (a sampled candidate of the draft model).
func (r *seq) leviathan(j int) bool {
	return j < len(r.prop.Tokens) && len(r.prop.Probs) > 0 && r.req.Mirostat == nil
}

// choose picks r's token from its processed scores at position j of its
// feed, and reports whether it is the candidate there.
func (g *Generator) choose(r *seq, scores []float32, j int, leviathan bool) (int, bool, error) {
	cand := r.prop.Tokens
	if leviathan {
		nv := len(scores)
		if cap(g.probs) < nv {
			g.probs = make([]float32, nv)
		}
		if t, ok, valid := speculative.Accept(g.probs[:nv], r.prop.Probs[j*nv:(j+1)*nv], scores, cand[j], &r.src); valid {
			return int(t), ok, nil
		}
	}
	t, err := r.choose.Choose(r.hist, scores, &r.src)
	return t, err == nil && j < len(cand) && int32(t) == cand[j], err
}

// releaseDraft empties the draft model's slot of r.
func (g *Generator) releaseDraft(r *seq) error {
	if r.spec != specDraft || r.slot < 0 {
		return nil
	}
	return g.draft.Release(&r.prop)
}

// SpeculationStats counts the speculation of a request.
type SpeculationStats struct {
	Steps    int // evaluations of the target that gave tokens
	Drafted  int // candidate tokens proposed
	Accepted int // candidate tokens accepted
}

// AcceptanceRate is Accepted / Drafted (0 when nothing was drafted).
func (s SpeculationStats) AcceptanceRate() float64 {
	if s.Drafted == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Drafted)
}

// MeanAccepted is the mean number of accepted candidates per step.
func (s SpeculationStats) MeanAccepted() float64 {
	if s.Steps == 0 {
		return 0
	}
	return float64(s.Accepted) / float64(s.Steps)
}

// Add counts ev, an event of the request: a step ends with a token that is
// not an accepted candidate, or with the request.
func (s *SpeculationStats) Add(ev Event) {
	if ev.Token < 0 {
		return
	}
	if ev.Accepted {
		s.Accepted++
	}
	if !ev.Accepted || ev.Finish != NotFinished {
		s.Steps++
		s.Drafted += ev.Drafted
	}
}
