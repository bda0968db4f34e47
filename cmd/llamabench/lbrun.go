package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// lbRow is one test of the llama-bench-style run: its parameters and the
// time of each repetition.
type lbRow struct {
	modelFile, modelType   string
	modelSize, modelParams uint64
	batch, ubatch, threads int
	gpuLayers              int
	typeK, typeV           llamacpp.KVType
	flashAttn              bool
	prompt, gen, depth     int
	testTime               time.Time
	samplesNs              []int64
}

// lbInstance is a context's parameters in the grid.
type lbInstance struct {
	batch, ubatch, threads int
	typeK, typeV           llamacpp.KVType
	flashAttn              bool
	depth                  int
}

// runLlamaBenchStyle runs llama-bench's tests with llamaloop: for every
// model and GPU layer count, every combination of the context options, each
// test in a context of its own, as llama-bench does, and prints each test
// as it finishes in the -o format.
func (a *app) runLlamaBenchStyle(ctx context.Context, o *options) error {
	lb := o.lb
	for _, path := range o.models {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && len(o.models) == 1 && filepath.Base(path) == defaultModel {
			return fmt.Errorf("model file %s does not exist: run make bench-models, or give a model with -m", path)
		}
		if err := cli.CheckModelFile("-m", path); err != nil {
			return err
		}
	}
	st := &status{}
	if a.stderrTerminal && !o.quiet {
		st.w = a.stderr
	}
	p := newLBPrinter(lb.output, a.stdout, describeLBBuild(), o)
	p.header()
	cache := &depthCache{}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, path := range o.models {
		for _, ngl := range o.gpuLayerGrid.vals {
			if err := a.lbModel(ctx, o, path, ngl, p, cache, rng, st); err != nil {
				st.clear()
				return err
			}
		}
	}
	st.clear()
	p.footer()
	return nil
}

// lbModel loads one model with ngl GPU layers and runs its tests.
func (a *app) lbModel(ctx context.Context, o *options, path string, ngl int, p lbPrinter, cache *depthCache, rng *rand.Rand, st *status) error {
	lb := o.lb
	var bar *cli.ProgressBar
	if st.w != nil {
		bar = cli.NewProgressBar(a.stderr, "loading "+filepath.Base(path))
	}
	m, err := cli.LoadModel(ctx, path, ngl, bar)
	if err != nil {
		return err
	}
	defer m.Close()
	info := m.Info()
	base := lbRow{modelFile: path, modelType: modelLabel(info.Description, info.Params), modelSize: info.Size,
		modelParams: info.Params, gpuLayers: ngl}
	for _, b := range lb.batches.vals {
		for _, ub := range lb.ubatches.vals {
			for _, tk := range lb.typeK.vals {
				for _, tv := range lb.typeV.vals {
					for _, fa := range lb.flashAttn.vals {
						for _, t := range o.threadGrid.vals {
							for _, d := range lb.depths.vals {
								in := lbInstance{batch: b, ubatch: ub, threads: t, typeK: tk, typeV: tv, flashAttn: fa, depth: d}
								for _, shape := range lb.tests() {
									st.set(fmt.Sprintf("%s: %s, %s", filepath.Base(path), shape.name(d), plural(t, "thread")))
									row := base
									if err := a.lbTest(ctx, o, m, in, shape, &row, cache, rng); err != nil {
										return err
									}
									st.clear()
									p.row(&row)
								}
							}
						}
					}
				}
			}
		}
	}
	return nil
}

// lbTest runs one test: a context of its own, a warm-up (the prompt, one
// generated token), then o.reps repetitions, each from a cache holding
// only the depth's tokens, timing the prompt and the generation together.
func (a *app) lbTest(ctx context.Context, o *options, m *llamacpp.Model, in lbInstance, shape lbTestShape, row *lbRow,
	cache *depthCache, rng *rand.Rand) error {
	what := fmt.Sprintf("-p %d -n %d -d %d", shape.prompt, shape.gen, in.depth)
	fa := llamacpp.FlashAttentionOff
	if in.flashAttn {
		fa = llamacpp.FlashAttentionOn
	}
	lc, err := cli.NewContext(m, what, llamacpp.ContextParams{ContextSize: max(1, shape.prompt+shape.gen+in.depth),
		BatchSize: in.batch, MicroBatchSize: min(in.ubatch, in.batch), Sequences: 1, Threads: in.threads, BatchThreads: in.threads,
		FlashAttention: fa, TypeK: in.typeK, TypeV: in.typeV})
	if err != nil {
		return err
	}
	defer lc.Close()
	// llama.cpp lowers n_batch to the context's size
	batch, err := llamacpp.NewBatch(min(in.batch, lc.BatchSize()), 1)
	if err != nil {
		return err
	}
	defer batch.Close()
	r := &lbRunner{lc: lc, batch: batch, rng: rng, vocab: m.Vocab().Size(), bos: -1}
	if m.Vocab().AddsBOS() {
		r.bos = m.Vocab().BOS()
	}
	row.batch, row.ubatch, row.threads = in.batch, in.ubatch, in.threads
	row.typeK, row.typeV, row.flashAttn = in.typeK, in.typeV, in.flashAttn
	row.prompt, row.gen, row.depth = shape.prompt, shape.gen, in.depth
	row.testTime = time.Now().UTC()

	if shape.prompt > 0 {
		if err := r.prompt(ctx, shape.prompt, 0); err != nil {
			return err
		}
	}
	if shape.gen > 0 {
		if err := r.generate(ctx, 1, shape.prompt); err != nil {
			return err
		}
	}
	key := depthKey{model: row.modelFile, gpuLayers: row.gpuLayers, typeK: in.typeK, typeV: in.typeV, depth: in.depth}
	for range o.reps {
		if err := lc.ClearCache(); err != nil {
			return err
		}
		if in.depth > 0 {
			if err := cache.fill(ctx, r, key); err != nil {
				return err
			}
		}
		start := time.Now()
		if shape.prompt > 0 {
			if err := r.prompt(ctx, shape.prompt, in.depth); err != nil {
				return err
			}
		}
		if shape.gen > 0 {
			if err := r.generate(ctx, shape.gen, in.depth+shape.prompt); err != nil {
				return err
			}
		}
		row.samplesNs = append(row.samplesNs, time.Since(start).Nanoseconds())
	}
	return nil
}

// lbRunner decodes random tokens in one sequence of a context, as
// llama-bench's test_prompt and test_gen do.
type lbRunner struct {
	lc    *llamacpp.Context
	batch *llamacpp.Batch
	rng   *rand.Rand
	vocab int
	bos   int32 // the first token at position 0, or -1
}

func (r *lbRunner) token(pos int) int32 {
	if pos == 0 && r.bos >= 0 {
		return r.bos
	}
	return int32(r.rng.IntN(r.vocab))
}

// prompt decodes n tokens from position pos in batches of the batch's
// capacity, each asking for the logits of its last token, and waits for
// the last batch (reading its logits synchronises with the device).
func (r *lbRunner) prompt(ctx context.Context, n, pos int) error {
	last := 0
	for done := 0; done < n; {
		r.batch.Clear()
		k := min(n-done, r.batch.Cap())
		for i := range k {
			idx, err := r.batch.Add(r.token(pos+done+i), int32(pos+done+i), 0, i == k-1)
			if err != nil {
				return err
			}
			last = idx
		}
		if err := r.lc.Decode(ctx, r.batch); err != nil {
			return err
		}
		done += k
	}
	_, err := r.lc.Logits(last)
	return err
}

// generate decodes n tokens one at a time from position pos, waiting for
// each.
func (r *lbRunner) generate(ctx context.Context, n, pos int) error {
	for i := range n {
		r.batch.Clear()
		if _, err := r.batch.Add(r.token(pos+i), int32(pos+i), 0, true); err != nil {
			return err
		}
		if err := r.lc.Decode(ctx, r.batch); err != nil {
			return err
		}
		if _, err := r.lc.Logits(0); err != nil {
			return err
		}
	}
	return nil
}

// depthKey says which cached depth state a test may restore: the same
// model, layers on the GPU and KV types (the state's layout), and depth.
type depthKey struct {
	model        string
	gpuLayers    int
	typeK, typeV llamacpp.KVType
	depth        int
}

// depthCache keeps the state of the last depth filled, as llama-bench
// does, so that the depth's tokens are decoded once, not once per
// repetition and test.
type depthCache struct {
	key   depthKey
	state []byte
}

// fill puts key.depth tokens into the empty cache of r's context: the
// stored state when it is key's and the context takes it, else decoded.
func (c *depthCache) fill(ctx context.Context, r *lbRunner, key depthKey) error {
	if c.state != nil && c.key == key {
		if err := r.lc.SetSeqState(0, c.state); err == nil {
			return nil
		}
		if err := r.lc.ClearCache(); err != nil {
			return err
		}
	}
	if err := r.prompt(ctx, key.depth, 0); err != nil {
		return err
	}
	state, err := r.lc.SeqState(0)
	if err != nil {
		return err
	}
	c.key, c.state = key, state
	return nil
}
