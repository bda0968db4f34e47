package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
	"github.com/llamaloop/llamaloop/llamacpp/llamabackend"
	"github.com/llamaloop/llamaloop/logits"
	"github.com/llamaloop/llamaloop/mirostat"
)

// The settings of the sampling chain and of Mirostat, on both sides.
const (
	chainPenalty     = 1.1
	chainPenaltyLast = 64
	chainTemperature = 0.8
	chainTopK        = 40
	chainTopP        = 0.95
	mirostatTau      = 5.0
	mirostatEta      = 0.1
)

// Measurement groups.
const (
	groupPrompt     = "prompt"
	groupGeneration = "generation"
	groupBatch      = "batch"
	groupBeam       = "beam"
)

// stat summarises repeated samples.
type stat struct {
	Samples []float64 `json:"samples"`
	Min     float64   `json:"min"`
	Median  float64   `json:"median"`
	Max     float64   `json:"max"`
	// Mean and Stddev (the sample standard deviation, n-1) are what
	// llama-bench reports: avg ± stddev.
	Mean   float64 `json:"mean"`
	Stddev float64 `json:"stddev"`
}

func newStat(samples []float64) stat {
	s := slices.Clone(samples)
	slices.Sort(s)
	st := stat{Samples: samples}
	st.Mean, st.Stddev = meanStddev(samples)
	if n := len(s); n > 0 {
		st.Min, st.Max = s[0], s[n-1]
		st.Median = s[n/2]
		if n%2 == 0 {
			st.Median = (s[n/2-1] + s[n/2]) / 2
		}
	}
	return st
}

// result is one measurement of one model.
type result struct {
	Name         string `json:"name"`
	Group        string `json:"group"`
	Method       string `json:"method"`
	PromptTokens int    `json:"prompt_tokens"`
	NewTokens    int    `json:"new_tokens"`
	Rows         int    `json:"rows"`
	Beams        int    `json:"beams"`
	// TokensPerS is prompt tokens per second (group prompt), generated
	// tokens per second after the first token (generation), all rows'
	// generated tokens per second (batch), or the returned sequence's
	// tokens per second (beam).
	TokensPerS stat `json:"tokens_per_s"`
	// PerRowTokensPerS is TokensPerS divided by the rows (batch).
	PerRowTokensPerS *stat `json:"per_row_tokens_per_s,omitempty"`
	// DecodedTokensPerS counts every token the beams fed to llama.cpp (beam).
	DecodedTokensPerS *stat `json:"decoded_tokens_per_s,omitempty"`
	// BoundFraction is the median generation speed over the memory-bandwidth
	// bound (one-row generation on the CPU).
	BoundFraction *float64 `json:"bound_fraction,omitempty"`
	// LlamaCpp is llama-bench's tokens/s for the same test (raw decode rows,
	// with --llama-bench).
	LlamaCpp *stat `json:"llama_cpp_tokens_per_s,omitempty"`
	// Ratio is the median of TokensPerS.Samples[i] / LlamaCpp.Samples[i],
	// each llama.cpp sample taken just before the same repetition of ours
	// (TokensPerS.Median / LlamaCpp.Median where the samples do not pair).
	Ratio *float64 `json:"ratio_to_llama_cpp,omitempty"`
	// Speculation describes a speculative decoding row (--draft,
	// --prompt-lookup).
	Speculation *speculation `json:"speculation,omitempty"`
}

// llamaBenchTest is the name of the llama.cpp test that r measures too, or
// "" when llama.cpp's tools have none: llama-bench's pp and tg tests are the
// raw decode loop's prompt processing and generation, and llama-batched-bench
// generates several rows at once as the batch rows do.
func (r result) llamaBenchTest() string {
	if r.Group == groupBatch {
		return batchedTestName(r.Rows, r.NewTokens, r.PromptTokens)
	}
	if r.Method != "raw" {
		return ""
	}
	switch r.Group {
	case groupPrompt:
		return testName(r.PromptTokens, 0, 0)
	case groupGeneration:
		return testName(0, r.NewTokens, r.PromptTokens)
	}
	return ""
}

// samplerResult is the per-token cost of choosing a token from one logits
// row, in microseconds.
type samplerResult struct {
	Name      string `json:"name"`
	VocabSize int    `json:"vocab_size"`
	Llamaloop stat   `json:"llamaloop_us"`
	LlamaCpp  stat   `json:"llama_cpp_us"`
}

// bench measures one loaded model.
type bench struct {
	o     *options
	model *llamacpp.Model
	vocab int
	rng   *rand.Rand
	// report receives each finished measurement; status names the next.
	report func(result)
	status func(name string)
	// pace runs before each repetition of the rows that llama.cpp's tools
	// measure too: one run of the tool of step (see comparison), or nothing.
	pace func(step string) error
}

// randomPrompt returns n token ids drawn from the ordinary part of the
// vocabulary (past the control and byte tokens where there is room).
func (b *bench) randomPrompt(n int) []int32 { return randomTokens(b.rng, b.vocab, n) }

// randomTokens returns n token ids of a vocabulary of vocab tokens drawn
// with rng, past the first 300 (control and byte tokens) where there is room.
func randomTokens(rng *rand.Rand, vocab, n int) []int32 {
	lo := min(300, vocab/2)
	p := make([]int32, n)
	for i := range p {
		p[i] = int32(lo + rng.IntN(vocab-lo))
	}
	return p
}

// newContext creates a context with the benchmark's threads. what names
// the options that set its size, for the error when it cannot fit.
func (b *bench) newContext(what string, cells, seqs int, unified bool) (*llamacpp.Context, error) {
	return cli.NewContext(b.model, what, llamacpp.ContextParams{ContextSize: cells, Sequences: seqs, UnifiedKV: unified,
		Threads: b.o.threads})
}

// newSingleContext makes a one-sequence context of cells cells and a batch
// of its batch size, for the measurements that drive llama.cpp directly.
func (b *bench) newSingleContext(what string, cells int) (*llamacpp.Context, *llamacpp.Batch, error) {
	lc, err := b.newContext(what, cells, 1, false)
	if err != nil {
		return nil, nil, err
	}
	batch, err := llamacpp.NewBatch(lc.BatchSize(), 1)
	if err != nil {
		lc.Close()
		return nil, nil, err
	}
	return lc, batch, nil
}

// repeat runs f o.reps times and returns its samples.
func (b *bench) repeat(ctx context.Context, f func() (float64, error)) ([]float64, error) {
	samples, err := b.repeatRows(ctx, "", 1, func(int) (float64, error) { return f() })
	if err != nil {
		return nil, err
	}
	return samples[0], nil
}

// repeatRows measures rows rows o.reps times, each repetition measuring
// every row once, and returns each row's samples. With a step (the rows
// llama.cpp's tools measure too) an untimed warm-up repetition comes first,
// as llama-bench's. When b.pace runs the step's tool, each repetition
// follows one run of it and untimed repetitions of its own for o.settle
// (at least one), as the tool's measurement follows its warm-up: sample i of a row and the tool's sample
// i are taken seconds apart, under the same conditions. On this project's
// 2-core virtual machine consecutive runs of llama-bench correlate (0.5
// from one run to the next, ±10% spread), so that the ratio of such a pair
// varies less than a ratio of runs taken further apart.
func (b *bench) repeatRows(ctx context.Context, step string, rows int, measure func(row int) (float64, error)) ([][]float64, error) {
	samples := make([][]float64, rows)
	rep := func(keep bool) error {
		for i := range rows {
			if err := ctx.Err(); err != nil {
				return err
			}
			// A row timed just after another row runs slower than after
			// itself (pp128 after pp512 at 0.92-0.96 of pp128 after
			// pp128, q8_0 and f16 on this project's 2-core VM, inside
			// llama_decode), while each of llama-bench's repetitions
			// follows one of the same test: a kept sample of several
			// rows follows an untimed run of its own row.
			if keep && step != "" && rows > 1 {
				if _, err := measure(i); err != nil {
					return err
				}
			}
			v, err := measure(i)
			if err != nil {
				return err
			}
			if keep {
				samples[i] = append(samples[i], v)
			}
		}
		return nil
	}
	if step != "" {
		if err := rep(false); err != nil {
			return nil, err
		}
	}
	for range b.o.reps {
		if step != "" && b.pace != nil {
			if err := b.pace(step); err != nil {
				return nil, err
			}
			// After a child process this process computes slower for
			// its next half second of work, however long it waited
			// (--settle's help): warm up for o.settle, not once.
			for warm := time.Now(); ; {
				if err := rep(false); err != nil {
					return nil, err
				}
				if time.Since(warm) >= b.o.settle {
					break
				}
			}
		}
		if err := rep(true); err != nil {
			return nil, err
		}
	}
	return samples, nil
}

// promptProcessing measures the time to the first token of each prompt
// length: the raw decode (up to the argmax of the last token's logits) and
// through package generation.
func (b *bench) promptProcessing(ctx context.Context) error {
	longest := slices.Max(b.o.promptLengths)
	lc, batch, err := b.newSingleContext(fmt.Sprintf("--pp %d", longest), longest+256)
	if err != nil {
		return err
	}
	defer lc.Close()
	defer batch.Close()
	samples, err := b.repeatRows(ctx, comparePrompt, len(b.o.promptLengths), func(i int) (float64, error) {
		n := b.o.promptLengths[i]
		b.status(fmt.Sprintf("pp%d raw decode", n))
		if err := lc.ClearCache(); err != nil {
			return 0, err
		}
		p := b.randomPrompt(n)
		start := time.Now()
		last, err := decodePrompt(ctx, lc, batch, p)
		if err != nil {
			return 0, err
		}
		// llama_decode only queues the last batch on a GPU; reading the
		// logits waits for it. Without this the raw loop timed the
		// launch, not the evaluation, and generation (which must read
		// the row) looked a quarter slower on an H200 (issue 12).
		row, err := lc.Logits(last)
		if err != nil {
			return 0, err
		}
		_ = logits.Argmax(row)
		return float64(n) / time.Since(start).Seconds(), nil
	})
	if err != nil {
		return err
	}
	for i, n := range b.o.promptLengths {
		b.report(result{Name: fmt.Sprintf("pp%d raw decode", n), Group: groupPrompt, Method: "raw",
			PromptTokens: n, Rows: 1, TokensPerS: newStat(samples[i])})
	}
	lb, err := llamabackend.New(lc)
	if err != nil {
		return err
	}
	defer lb.Close()
	gen := generation.NewGenerator(lb, nil)
	cfg := lengthConfig(genconfig.Default(), 1)
	for _, n := range b.o.promptLengths {
		b.status(fmt.Sprintf("pp%d generation", n))
		samples, err := b.repeat(ctx, func() (float64, error) {
			req := generation.Request{Prompt: b.randomPrompt(n), Config: cfg}
			start := time.Now()
			for _, err := range gen.Stream(ctx, []generation.Request{req}) {
				if err != nil {
					return 0, err
				}
				break
			}
			return float64(n) / time.Since(start).Seconds(), ctx.Err()
		})
		if err != nil {
			return err
		}
		b.report(result{Name: fmt.Sprintf("pp%d generation", n), Group: groupPrompt, Method: "generation",
			PromptTokens: n, Rows: 1, TokensPerS: newStat(samples)})
	}
	return nil
}

// decodePrompt evaluates p in sequence 0 of lc, in batches of n_batch, and
// returns the batch index of the last token, whose logits it asked for.
func decodePrompt(ctx context.Context, lc *llamacpp.Context, batch *llamacpp.Batch, p []int32) (int, error) {
	last := 0
	for start := 0; start < len(p); start += batch.Cap() {
		batch.Clear()
		end := min(start+batch.Cap(), len(p))
		for i := start; i < end; i++ {
			idx, err := batch.Add(p[i], int32(i), 0, i == len(p)-1)
			if err != nil {
				return 0, err
			}
			last = idx
		}
		if err := lc.Decode(ctx, batch); err != nil {
			return 0, err
		}
	}
	return last, nil
}

// lengthConfig makes cfg generate exactly n tokens: with an empty
// eos_token_id (not nil, which beam search would fill with the model's
// end-of-generation tokens) and without a tokenizer nothing ends a row early.
func lengthConfig(cfg *genconfig.Config, n int) *genconfig.Config {
	cfg.MaxNewTokens = &n
	cfg.EOSTokenID = []int32{}
	return cfg
}

// chainConfig is the sampling chain: llama.cpp's usual settings.
func chainConfig() *genconfig.Config {
	cfg := genconfig.Default()
	cfg.DoSample = true
	cfg.RepetitionPenalty = chainPenalty
	cfg.Temperature = chainTemperature
	cfg.TopK = chainTopK
	cfg.TopP = chainTopP
	return cfg
}

func mirostatConfig() *mirostat.Config {
	return &mirostat.Config{Version: mirostat.V2, Tau: mirostatTau, Eta: mirostatEta}
}

// generation measures one-row generation: the raw decode loop, then greedy,
// the sampling chain and Mirostat v2 through package generation.
func (b *bench) generation(ctx context.Context) error {
	p, g := b.o.promptTokens, b.o.newTokens
	lc, batch, err := b.newSingleContext(fmt.Sprintf("--prompt %d, --tg %d", p, g), p+g+256)
	if err != nil {
		return err
	}
	defer lc.Close()
	defer batch.Close()
	b.status(fmt.Sprintf("tg%d raw decode", g))
	raw, err := b.repeatRows(ctx, compareGeneration, 1, func(int) (float64, error) {
		if err := lc.ClearCache(); err != nil {
			return 0, err
		}
		prompt := b.randomPrompt(p)
		last, err := decodePrompt(ctx, lc, batch, prompt)
		if err != nil {
			return 0, err
		}
		row, err := lc.Logits(last)
		if err != nil {
			return 0, err
		}
		next := int32(logits.Argmax(row))
		start := time.Now()
		for i := range g {
			batch.Clear()
			if _, err := batch.Add(next, int32(p+i), 0, true); err != nil {
				return 0, err
			}
			if err := lc.Decode(ctx, batch); err != nil {
				return 0, err
			}
			if row, err = lc.Logits(0); err != nil {
				return 0, err
			}
			next = int32(logits.Argmax(row))
		}
		return float64(g) / time.Since(start).Seconds(), nil
	})
	if err != nil {
		return err
	}
	b.report(result{Name: fmt.Sprintf("tg%d raw decode", g), Group: groupGeneration, Method: "raw",
		PromptTokens: p, NewTokens: g, Rows: 1, TokensPerS: newStat(raw[0])})

	lb, err := llamabackend.New(lc)
	if err != nil {
		return err
	}
	defer lb.Close()
	gen := generation.NewGenerator(lb, nil)
	methods := []struct {
		name, method string
		cfg          *genconfig.Config
		miro         *mirostat.Config
	}{
		{"greedy", "greedy", genconfig.Default(), nil},
		{"sampling chain", "sampling", chainConfig(), nil},
		{"Mirostat v2", "mirostat-v2", genconfig.Default(), mirostatConfig()},
	}
	for _, m := range methods {
		cfg := lengthConfig(m.cfg, g+1)
		b.status(fmt.Sprintf("tg%d %s", g, m.name))
		seed := uint64(0)
		samples, err := b.repeat(ctx, func() (float64, error) {
			seed++
			req := generation.Request{Prompt: b.randomPrompt(p), Config: cfg, Seed: seed, Mirostat: m.miro}
			tps, _, err := timeStream(ctx, gen, []generation.Request{req})
			return tps, err
		})
		if err != nil {
			return err
		}
		b.report(result{Name: fmt.Sprintf("tg%d %s", g, m.name), Group: groupGeneration, Method: m.method,
			PromptTokens: p, NewTokens: g, Rows: 1, TokensPerS: newStat(samples)})
	}
	return nil
}

// timeStream generates reqs and returns the tokens per second after the
// first step (whose cost is the prompts), and the tokens generated.
func timeStream(ctx context.Context, gen *generation.Generator, reqs []generation.Request) (float64, int, error) {
	var first time.Time
	n, firstStep := 0, 0
	for ev, err := range gen.Stream(ctx, reqs) {
		if err != nil {
			return 0, 0, err
		}
		if ev.Finish == generation.FinishError || ev.Finish == generation.FinishContextFull {
			return 0, 0, fmt.Errorf("row %d: %s: %v", ev.Request, ev.Finish, ev.Err)
		}
		if ev.Token < 0 {
			continue
		}
		n++
		if first.IsZero() {
			first = time.Now()
		}
		if n <= len(reqs) {
			firstStep++
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, 0, err
	}
	d := time.Since(first)
	if n <= firstStep || d <= 0 {
		return 0, n, errors.New("no token after the first step")
	}
	return float64(n-firstStep) / d.Seconds(), n, nil
}

// batched measures greedy generation of several rows at once.
func (b *bench) batched(ctx context.Context) error {
	if len(b.o.batchRows) == 0 {
		return nil
	}
	p, g := b.o.promptTokens, b.o.newTokens
	rows := batchSequences(b.o.batchRows)
	lc, err := b.newContext(fmt.Sprintf("--batch %d, --prompt %d, --tg %d", rows, p, g), batchCells(rows, p, g), rows, false)
	if err != nil {
		return err
	}
	defer lc.Close()
	lb, err := llamabackend.New(lc)
	if err != nil {
		return err
	}
	defer lb.Close()
	gen := generation.NewGenerator(lb, nil)
	cfg := lengthConfig(genconfig.Default(), g+1)
	counts := batchCounts(b.o.batchRows)
	samples, err := b.repeatRows(ctx, compareBatched, len(counts), func(i int) (float64, error) {
		b.status(fmt.Sprintf("batch %d x tg%d", counts[i], g))
		reqs := make([]generation.Request, counts[i])
		for j := range reqs {
			reqs[j] = generation.Request{Prompt: b.randomPrompt(p), Config: cfg}
		}
		tps, _, err := timeStream(ctx, gen, reqs)
		return tps, err
	})
	if err != nil {
		return err
	}
	for i, r := range counts {
		perRow := make([]float64, len(samples[i]))
		for j, s := range samples[i] {
			perRow[j] = s / float64(r)
		}
		pr := newStat(perRow)
		b.report(result{Name: fmt.Sprintf("batch %d x tg%d", r, g), Group: groupBatch, Method: "greedy",
			PromptTokens: p, NewTokens: g, Rows: r, TokensPerS: newStat(samples[i]), PerRowTokensPerS: &pr})
	}
	return nil
}

// batchSequences is the number of sequences of the batch rows' context: the
// most rows of batchRows that llama.cpp can decode together.
func batchSequences(batchRows []int) int { return min(slices.Max(batchRows), llamacpp.MaxSequences()) }

// batchCounts are the row counts of batchRows that the batch rows' context
// can decode together (at most batchSequences).
func batchCounts(batchRows []int) []int {
	seqs := batchSequences(batchRows)
	return slices.DeleteFunc(slices.Clone(batchRows), func(r int) bool { return r > seqs })
}

// batchCells is the size of the batch rows' KV cache: each of rows
// sequences gets the cells that a prompt of p tokens and g+1 new ones take,
// rounded up as llama.cpp pads a sequence's cells.
func batchCells(rows, p, g int) int { return rows * roundUp(p+g+1, 256) }

// beams measures beam search of one prompt for each beam count.
func (b *bench) beams(ctx context.Context) error {
	if len(b.o.beams) == 0 {
		return nil
	}
	p, g := b.o.promptTokens, b.o.newTokens
	most := min(slices.Max(b.o.beams), llamacpp.MaxSequences())
	lc, err := b.newContext(fmt.Sprintf("--beams %d, --prompt %d, --tg %d", most, p, g), p+most*(g+1)+256, most, true)
	if err != nil {
		return err
	}
	defer lc.Close()
	lb, err := llamabackend.New(lc)
	if err != nil {
		return err
	}
	defer lb.Close()
	for _, k := range b.o.beams {
		if k > most || k < 2 {
			continue
		}
		cfg := lengthConfig(genconfig.Default(), g+1)
		cfg.NumBeams = k
		b.status(fmt.Sprintf("beam %d x tg%d", k, g))
		var decoded []float64
		samples, err := b.repeat(ctx, func() (float64, error) {
			var first time.Time
			opts := beam.Options{Config: cfg, Progress: func(beam.Progress) {
				if first.IsZero() {
					first = time.Now()
				}
			}}
			res, err := beam.Search(ctx, lb, [][]int32{b.randomPrompt(p)}, opts)
			if err != nil {
				return 0, err
			}
			d := time.Since(first).Seconds()
			out := len(res.Hypotheses[0][0].Tokens) - 1
			// the first step's k tokens come from the prompt's logits
			decoded = append(decoded, float64(res.Stats.Tokens-p)/d)
			return float64(out) / d, nil
		})
		if err != nil {
			return err
		}
		ds := newStat(decoded)
		b.report(result{Name: fmt.Sprintf("beam %d x tg%d", k, g), Group: groupBeam, Method: "beam",
			PromptTokens: p, NewTokens: g, Rows: 1, Beams: k, TokensPerS: newStat(samples), DecodedTokensPerS: &ds})
	}
	return nil
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }
