package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

// speculating reports whether the run decodes speculatively: with the
// draft model of --assistant-model, or prompt lookup (--prompt-lookup).
func (s *session) speculating() bool { return s.o.assistantModel != "" || s.cfg.PromptLookup() }

// generator returns the generator over b: with --assistant-model, its draft
// model of slots sequences of cells cells, which closeDraft frees.
func (s *session) generator(ctx context.Context, b backend.Backend, slots, cells int) (gen *generation.Generator, closeDraft func(), err error) {
	if s.o.assistantModel == "" {
		return generation.NewGenerator(b, s.tok), func() {}, nil
	}
	draft, closeDraft, err := s.draftBackend(ctx, slots, cells)
	if err != nil {
		return nil, nil, err
	}
	if gen, err = generation.New(b, s.tok, generation.Options{Draft: draft}); err != nil {
		closeDraft()
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	return gen, closeDraft, nil
}

// speculationNote is the summary's note on the speculation of a run.
func speculationNote(st generation.SpeculationStats) string {
	return fmt.Sprintf("speculative: %d of %d candidates accepted (%.0f%%), %.2f per step",
		st.Accepted, st.Drafted, 100*st.AcceptanceRate(), st.MeanAccepted())
}

// draftBackend loads --assistant-model and makes a backend of slots
// sequences of cells cells over it; closeDraft frees both.
func (s *session) draftBackend(ctx context.Context, slots, cells int) (draft *llamabackend.Backend, closeDraft func(), err error) {
	dm, err := cli.LoadModel(ctx, s.o.assistantModel, s.o.gpuLayers, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	size := slots * roundUp(cells, 256)
	dctx, err := cli.NewContext(dm, "--assistant-model, "+s.sizeOptions(slots),
		llamacpp.ContextParams{ContextSize: size, Sequences: slots, Threads: s.o.threads,
			BatchSize: s.o.batch, MicroBatchSize: s.o.ubatch})
	if err != nil {
		dm.Close()
		return nil, nil, err
	}
	if draft, err = llamabackend.New(dctx); err != nil {
		dctx.Close()
		dm.Close()
		return nil, nil, fmt.Errorf("--assistant-model: %w", err)
	}
	return draft, func() { closeBackend(draft); dm.Close() }, nil
}

// demoPromptLookup is the demo's prompt lookup length when neither
// --prompt-lookup nor --assistant-model is given.
const demoPromptLookup = 10

// demoSpeculative is --demo's fifth method: greedy speculative decoding
// with --assistant-model or prompt lookup, whose text is greedy's.
func (s *session) demoSpeculative(ctx context.Context, greedy *genconfig.Config, toks []int32, p prompt) (*demoMethod, error) {
	cfg := greedy.Clone()
	if s.o.assistantModel == "" && !cfg.PromptLookup() {
		n := demoPromptLookup
		cfg.PromptLookupNumTokens = &n
	}
	m := &demoMethod{name: "speculative greedy"}
	m.row = &row{index: 4, sequences: 1, prompt: p, promptTokens: len(toks), method: m.name}
	cells := cfg.Resolve(len(toks)).MaxLength
	lb, err := s.newBackend(1, cells, false)
	if err != nil {
		return nil, err
	}
	defer closeBackend(lb)
	what := fmt.Sprintf("draft %s, %d tokens", shortName(s.o.assistantModel), cfg.NumAssistantTokens)
	if cfg.PromptLookup() {
		what = fmt.Sprintf("prompt lookup %d", *cfg.PromptLookupNumTokens)
	}
	gen, closeDraft, err := s.generator(ctx, lb, 1, cells)
	if err != nil {
		return nil, err
	}
	defer closeDraft()
	start := time.Now()
	st, err := s.stream(ctx, gen, []generation.Request{{Prompt: toks, Config: cfg}}, []*row{m.row}, 1, nopPrinter{})
	m.elapsed = time.Since(start)
	if err != nil {
		return nil, err
	}
	m.settings = fmt.Sprintf("%s; %d of %d accepted, %d steps", what, st.spec.Accepted, st.spec.Drafted, st.spec.Steps)
	return m, nil
}
