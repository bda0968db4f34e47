package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/beam"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/generation"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/replay"
	"github.com/llamaloop/llamaloop/logits"
)

// replayReport is the JSON document of --replay with --json.
type replayReport struct {
	Schema   string        `json:"schema"`
	Time     time.Time     `json:"time"`
	Profile  string        `json:"profile"`
	Machine  machine       `json:"machine"`
	Settings settings      `json:"settings"`
	Models   []replayModel `json:"models"`
}

// replayModel is one profiled model: the speeds measured on the replay
// backends and the ratios of each repetition, with the replay's thread
// sleeping and spinning while the device works (replay.Wait). The speeds of
// the spinning backends are named with a " (spinning)" suffix.
type replayModel struct {
	Name      string             `json:"name"`
	VocabSize int                `json:"vocab_size"`
	StepMS    float64            `json:"step_ms"`
	Speeds    map[string]stat    `json:"tokens_per_s"`
	Ratios    map[string]stat    `json:"ratios"`
	Spinning  map[string]stat    `json:"spinning_ratios"`
	Device    map[string]float64 `json:"device_ratios,omitempty"`

	order   []string             // ratio names in the order measured
	samples map[string][]float64 // per measurement, per repetition
	pairs   map[string][2]string // ratio name: numerator, denominator
}

// spinSuffix names the measurements on the spinning backends.
const spinSuffix = " (spinning)"

// runReplay measures every ratio of the loop against the raw decode loop on
// replay backends of each model of the profile: the device waits as the
// profile says, and the Go side runs on this machine's cores. Each
// repetition runs every measurement once, one after the other, so that the
// machine's changing load hits numerator and denominator alike; a ratio's
// samples are those of the repetitions.
func (a *app) runReplay(ctx context.Context, o *options) error {
	data, err := cli.ReadFile(ctx, o.replay)
	if err != nil {
		return fmt.Errorf("--replay: %w", err)
	}
	prof, err := replay.ParseProfile(data, o.replay)
	if err != nil {
		return fmt.Errorf("--replay: %w", err)
	}
	out := a.stdout
	if o.jsonPath == "-" {
		out = a.stderr
	}
	rep := &replayReport{Schema: "llamabench-replay/2", Time: time.Now().UTC().Truncate(time.Second), Profile: prof.Name,
		Machine: describeMachine(),
		Settings: settings{Threads: o.threads, Repetitions: o.reps, PromptLengths: o.promptLengths,
			PromptTokens: o.promptTokens, NewTokens: o.newTokens, BatchRows: []int{}, Beams: o.beams}}
	m := rep.Machine
	fmt.Fprintf(out, "llamabench --replay %s: device %s", o.replay, prof.Name)
	if prof.Note != "" {
		fmt.Fprintf(out, "\n  (%s)", prof.Note)
	}
	fmt.Fprintf(out, "\nGo side on: %s, %d cores, %s/%s; %d repetitions, interleaved\n", m.CPU, m.Cores, m.OS, m.Arch, o.reps)
	for _, mp := range prof.Models {
		rm, err := replayModelBench(ctx, o, mp)
		if err != nil {
			return fmt.Errorf("%s: %w", mp.Name, err)
		}
		writeReplayTable(out, mp, rm)
		rep.Models = append(rep.Models, *rm)
	}
	if o.jsonPath != "" {
		return writeJSON(o.jsonPath, a.stdout, rep)
	}
	return nil
}

// replayBench holds the backends and generators of one profiled model.
type replayBench struct {
	o      *options
	single *replay.Backend
	multi  *replay.Backend
	gen1   *generation.Generator
	genN   *generation.Generator
	rng    *rand.Rand
	vocab  int
	slots  int
	wait   replay.Wait
}

func (r *replayBench) prompt(n int) []int32 { return randomTokens(r.rng, r.vocab, n) }

func replayModelBench(ctx context.Context, o *options, mp replay.ModelProfile) (*replayModel, error) {
	rm := &replayModel{Name: mp.Name, VocabSize: mp.VocabSize, StepMS: float64(mp.StepDuration(1)) / 1e6,
		Speeds: map[string]stat{}, Ratios: map[string]stat{}, Spinning: map[string]stat{}, Device: mp.Ratios,
		samples: map[string][]float64{}, pairs: map[string][2]string{}}
	var ms []measurement
	for _, w := range []replay.Wait{replay.Sleep, replay.Spin} {
		r, err := newReplayBench(o, mp, w)
		if err != nil {
			return nil, err
		}
		ms = append(ms, r.measurements(ctx, rm)...)
	}

	// One warm-up round, then the repetitions, every measurement once in each.
	for rep := -1; rep < o.reps; rep++ {
		for _, m := range ms {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			v, err := m.run()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.name, err)
			}
			if rep >= 0 {
				rm.samples[m.name] = append(rm.samples[m.name], v)
			}
		}
	}
	for name, s := range rm.samples {
		rm.Speeds[name] = newStat(s)
	}
	for name, p := range rm.pairs {
		for _, sfx := range []string{"", spinSuffix} {
			num, den := rm.samples[p[0]+sfx], rm.samples[p[1]+sfx]
			ratios := make([]float64, len(num))
			for i := range num {
				ratios[i] = num[i] / den[i]
			}
			if sfx == "" {
				rm.Ratios[name] = newStat(ratios)
			} else {
				rm.Spinning[name] = newStat(ratios)
			}
		}
	}
	return rm, nil
}

// measurement is one speed of a repetition.
type measurement struct {
	name string
	run  func() (float64, error)
}

// newReplayBench makes the backends and generators of one model, waiting as w.
func newReplayBench(o *options, mp replay.ModelProfile, w replay.Wait) (*replayBench, error) {
	slots := max(1, slices.Max(append([]int{1}, o.beams...)))
	single, err := replay.New(mp, 1)
	if err != nil {
		return nil, err
	}
	multi, err := replay.New(mp, slots)
	if err != nil {
		return nil, err
	}
	single.Wait, multi.Wait = w, w
	return &replayBench{o: o, single: single, multi: multi, gen1: generation.NewGenerator(single, nil),
		genN: generation.NewGenerator(multi, nil), rng: rand.New(rand.NewPCG(1, 2)), vocab: mp.VocabSize,
		slots: slots, wait: w}, nil
}

// measurements lists r's measurements, named with spinSuffix when r spins,
// and enters the ratios between them in rm (once, by the sleeping bench).
func (r *replayBench) measurements(ctx context.Context, rm *replayModel) []measurement {
	o, sfx := r.o, ""
	if r.wait == replay.Spin {
		sfx = spinSuffix
	}
	ratio := func(name, num, den string) {
		if sfx == "" {
			rm.pairs[name] = [2]string{num, den}
			rm.order = append(rm.order, name)
		}
	}
	g := o.newTokens
	raw := fmt.Sprintf("tg%d raw decode", g)
	ms := []measurement{{raw + sfx, func() (float64, error) { return r.rawDecode(ctx) }}}
	for _, m := range []struct {
		name string
		cfg  *genconfig.Config
	}{{"greedy", genconfig.Default()}, {"sampling chain", chainConfig()}, {"Mirostat v2", genconfig.Default()}} {
		name := fmt.Sprintf("tg%d %s", g, m.name)
		cfg := lengthConfig(m.cfg, g+1)
		miro := m.name == "Mirostat v2"
		seed := uint64(0)
		ms = append(ms, measurement{name + sfx, func() (float64, error) {
			seed++
			req := generation.Request{Prompt: r.prompt(o.promptTokens), Config: cfg, Seed: seed}
			if miro {
				req.Mirostat = mirostatConfig()
			}
			tps, _, err := timeStream(ctx, r.gen1, []generation.Request{req})
			return tps, err
		}})
		ratio(m.name+" / raw", name, raw)
	}
	for _, k := range o.beams {
		if k < 2 || k > r.slots {
			continue
		}
		batch := fmt.Sprintf("batch %d x tg%d", k, g)
		bm := fmt.Sprintf("beam %d x tg%d decoded", k, g)
		cfg := lengthConfig(genconfig.Default(), g+1)
		bcfg := lengthConfig(genconfig.Default(), g+1)
		bcfg.NumBeams = k
		ms = append(ms, measurement{batch + sfx, func() (float64, error) {
			reqs := make([]generation.Request, k)
			for i := range reqs {
				reqs[i] = generation.Request{Prompt: r.prompt(o.promptTokens), Config: cfg}
			}
			tps, _, err := timeStream(ctx, r.genN, reqs)
			return tps, err
		}}, measurement{bm + sfx, func() (float64, error) { return r.beamDecoded(ctx, bcfg) }})
		ratio(fmt.Sprintf("beam %d decoded / batch %d greedy", k, k), bm, batch)
	}
	for _, n := range o.promptLengths {
		rawPP := fmt.Sprintf("pp%d raw decode", n)
		genPP := fmt.Sprintf("pp%d generation", n)
		ms = append(ms, measurement{rawPP + sfx, func() (float64, error) { return r.rawPrompt(ctx, n) }},
			measurement{genPP + sfx, func() (float64, error) { return r.generationPrompt(ctx, n) }})
		ratio(fmt.Sprintf("pp%d generation / raw decode", n), genPP, rawPP)
	}
	return ms
}

// rawDecode is the raw decode loop on the replay backend: the prompt, then
// one Eval and an argmax per token, timed after the first token as
// timeStream times the loop.
func (r *replayBench) rawDecode(ctx context.Context) (float64, error) {
	b := r.single
	if err := b.Clear(0); err != nil {
		return 0, err
	}
	feed := []backend.Feed{{Slot: 0, Tokens: r.prompt(r.o.promptTokens)}}
	if err := b.Eval(ctx, feed); err != nil {
		return 0, err
	}
	next := []int32{int32(logits.Argmax(b.Logits(0)))}
	feed[0].Tokens = next
	start := time.Now()
	for range r.o.newTokens {
		if err := b.Eval(ctx, feed); err != nil {
			return 0, err
		}
		next[0] = int32(logits.Argmax(b.Logits(0)))
	}
	return float64(r.o.newTokens) / time.Since(start).Seconds(), nil
}

// rawPrompt is the raw prompt evaluation up to its first token: the logits
// of the last prompt token and their argmax.
func (r *replayBench) rawPrompt(ctx context.Context, n int) (float64, error) {
	b := r.single
	if err := b.Clear(0); err != nil {
		return 0, err
	}
	feed := []backend.Feed{{Slot: 0, Tokens: r.prompt(n)}}
	start := time.Now()
	if err := b.Eval(ctx, feed); err != nil {
		return 0, err
	}
	_ = logits.Argmax(b.Logits(0))
	return float64(n) / time.Since(start).Seconds(), nil
}

// generationPrompt is the time to the first token through package
// generation, as llamabench measures it on llama.cpp.
func (r *replayBench) generationPrompt(ctx context.Context, n int) (float64, error) {
	req := generation.Request{Prompt: r.prompt(n), Config: lengthConfig(genconfig.Default(), 1)}
	start := time.Now()
	for _, err := range r.gen1.Stream(ctx, []generation.Request{req}) {
		if err != nil {
			return 0, err
		}
		break
	}
	return float64(n) / time.Since(start).Seconds(), ctx.Err()
}

// beamDecoded is the tokens per second that a beam search feeds the
// backend after its prompt, as llamabench's beam measurement reports them.
func (r *replayBench) beamDecoded(ctx context.Context, cfg *genconfig.Config) (float64, error) {
	var first time.Time
	opts := beam.Options{Config: cfg, Progress: func(beam.Progress) {
		if first.IsZero() {
			first = time.Now()
		}
	}}
	p := r.o.promptTokens
	res, err := beam.Search(ctx, r.multi, [][]int32{r.prompt(p)}, opts)
	if err != nil {
		return 0, err
	}
	// As in bench.beams: every token fed after the first step.
	return float64(res.Stats.Tokens-p) / time.Since(first).Seconds(), nil
}

// writeReplayTable prints one model's speeds and ratios.
func writeReplayTable(w io.Writer, mp replay.ModelProfile, rm *replayModel) {
	fmt.Fprintf(w, "\nmodel %s (replayed): vocabulary %d, %.3f ms a step at 1 row, %.0f prompt tokens/s\n",
		mp.Name, mp.VocabSize, rm.StepMS, mp.PromptTokensPerS)
	fmt.Fprintf(w, "\n%-34s %12s %12s\n", "measurement", "median t/s", "min t/s")
	names := make([]string, 0, len(rm.Speeds))
	for n := range rm.Speeds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "%-34s %12.1f %12.1f\n", n, rm.Speeds[n].Median, rm.Speeds[n].Min)
	}
	fmt.Fprintf(w, "\n%-34s %8s %8s %8s %8s %10s\n", "ratio (median; min, max spinning)", "sleeping", "spinning", "min", "max", "on device")
	for _, n := range rm.order {
		sl, sp := rm.Ratios[n], rm.Spinning[n]
		dev := ""
		if v, ok := rm.Device[n]; ok {
			dev = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(w, "%-34s %8.3f %8.3f %8.3f %8.3f %10s\n", n, sl.Median, sp.Median, sp.Min, sp.Max, dev)
	}
}
