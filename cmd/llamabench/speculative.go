package main

import (
	"context"
	"fmt"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
)

const groupSpeculative = "speculative"

// speculation is what a speculative row adds to its result.
type speculation struct {
	// Speedup is the row's median tokens/s over the plain row's, measured
	// interleaved with it on the same prompts.
	Speedup float64 `json:"speedup"`
	// AcceptanceRate is accepted / drafted candidates, over all repetitions.
	AcceptanceRate float64 `json:"acceptance_rate"`
	// MeanAccepted is the mean number of accepted candidates per target
	// evaluation (each evaluation adds one token more).
	MeanAccepted float64 `json:"mean_accepted"`
	Draft        string  `json:"draft,omitempty"`
	PromptLookup int     `json:"prompt_lookup,omitempty"`
	DraftTokens  int     `json:"num_assistant_tokens,omitempty"`
	Threshold    float64 `json:"assistant_confidence_threshold,omitempty"`
}

// speculativeOnly reports whether the run measures speculative decoding
// (--draft or --prompt-lookup) instead of the usual table.
func (o *options) speculativeOnly() bool { return o.draft != "" || o.promptLookup > 0 }

// speculative measures one-row generation of --tg tokens from a --prompt
// token prompt, greedy and with the sampling chain, plainly (package
// generation) and speculatively (a generator with a draft model, or prompt lookup) with the --draft
// model or prompt lookup, interleaved repetition by repetition on the same
// prompts. Times run from the request to its last token, prompt included,
// on both sides.
func (b *bench) speculative(ctx context.Context) error {
	p, g := b.o.promptTokens, b.o.newTokens
	lc, err := b.newContext(fmt.Sprintf("--prompt %d, --tg %d", p, g), p+g+64, 1, false)
	if err != nil {
		return err
	}
	defer lc.Close()
	target, err := llamabackend.New(lc)
	if err != nil {
		return err
	}
	defer target.Close()
	opts := generation.Options{}
	if b.o.draft != "" {
		dm, err := cli.LoadModel(ctx, b.o.draft, b.o.gpuLayers, nil)
		if err != nil {
			return fmt.Errorf("--draft: %w", err)
		}
		defer dm.Close()
		dc, err := cli.NewContext(dm, "--draft", llamacpp.ContextParams{ContextSize: p + g + 64, Sequences: 1, Threads: b.o.threads})
		if err != nil {
			return err
		}
		defer dc.Close()
		draft, err := llamabackend.New(dc)
		if err != nil {
			return err
		}
		defer draft.Close()
		opts.Draft = draft
	}
	dec, err := generation.New(target, nil, opts)
	if err != nil {
		return fmt.Errorf("--draft: %w", err)
	}
	gen := generation.NewGenerator(target, nil)

	for _, method := range []struct {
		name string
		cfg  func() *genconfig.Config
	}{
		{"greedy", genconfig.Default},
		{"sampling", chainConfig},
	} {
		cfg := lengthConfig(method.cfg(), g)
		scfg := cfg.Clone()
		scfg.NumAssistantTokens = b.o.draftTokens
		scfg.AssistantConfidenceThreshold = b.o.draftThreshold
		if b.o.promptLookup > 0 {
			scfg.PromptLookupNumTokens = &b.o.promptLookup
		}
		var plain, spec []float64
		var st generation.SpeculationStats
		b.status(fmt.Sprintf("tg%d %s, plain and speculative", g, method.name))
		for rep := range b.o.reps {
			prompt := b.randomPrompt(p)
			seed := uint64(rep)
			start := time.Now()
			res, err := gen.Generate(ctx, []generation.Request{{Prompt: prompt, Config: cfg, Seed: seed}})
			if err != nil {
				return err
			}
			plain = append(plain, float64(len(res[0].Tokens))/time.Since(start).Seconds())
			start = time.Now()
			sres, err := dec.Generate(ctx, []generation.Request{{Prompt: prompt, Config: scfg, Seed: seed}})
			if err != nil {
				return err
			}
			spec = append(spec, float64(len(sres[0].Tokens))/time.Since(start).Seconds())
			st.Steps += sres[0].Speculation.Steps
			st.Drafted += sres[0].Speculation.Drafted
			st.Accepted += sres[0].Speculation.Accepted
		}
		pr := result{Name: fmt.Sprintf("tg%d %s", g, method.name), Group: groupSpeculative, Method: "plain",
			PromptTokens: p, NewTokens: g, Rows: 1, TokensPerS: newStat(plain)}
		sr := pr
		sr.Name, sr.Method, sr.TokensPerS = fmt.Sprintf("tg%d %s spec.", g, method.name), "speculative", newStat(spec)
		sr.Speculation = &speculation{Speedup: sr.TokensPerS.Median / pr.TokensPerS.Median,
			AcceptanceRate: st.AcceptanceRate(), MeanAccepted: st.MeanAccepted(), Draft: b.o.draft,
			PromptLookup: b.o.promptLookup}
		if b.o.draft != "" && b.o.promptLookup == 0 {
			sr.Speculation.DraftTokens = b.o.draftTokens
			sr.Speculation.Threshold = b.o.draftThreshold
		}
		b.report(pr)
		b.report(sr)
	}
	return nil
}

// note is the table's note of a speculative row.
func (s *speculation) note() string {
	return fmt.Sprintf("x%.2f; acceptance %.2f, %.2f accepted per step", s.Speedup, s.AcceptanceRate, s.MeanAccepted)
}
