package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
)

// app is one run of the command with its output streams.
type app struct {
	stdout, stderr io.Writer
	stderrTerminal bool
	interrupts     <-chan os.Signal
}

func (a *app) main(args []string) int {
	out := cli.NewOutput(a.stdout)
	a.stdout = out
	o, err := parseArgs(args, a.stdout)
	if errors.Is(err, flag.ErrHelp) {
		return cli.ExitOK
	}
	if err == nil && o.version {
		fmt.Fprintln(a.stdout, cli.BuildVersion())
		return cli.ExitOK
	}
	if err == nil {
		cli.LogWarnings(a.stderr, "llamabench", o.quiet)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			select {
			case <-a.interrupts:
				cancel()
			case <-ctx.Done():
			}
		}()
		err = a.run(ctx, o)
		cancel()
	}
	if err == nil {
		err = out.Err() // lost output is a failure
	}
	switch code := cli.ExitCode(err); code {
	case cli.ExitOK, cli.ExitBrokenPipe:
		return code
	case cli.ExitInterrupted:
		fmt.Fprintln(a.stderr, "llamabench: interrupted")
		return code
	case cli.ExitUsage:
		fmt.Fprintf(a.stderr, "llamabench: %s (see llamabench --help)\n", cli.Message(err))
		return code
	default:
		fmt.Fprintf(a.stderr, "llamabench: %s\n", cli.Message(err))
		return code
	}
}

// status shows what is being measured on a terminal's stderr.
type status struct {
	w     io.Writer
	shown bool
}

func (s *status) set(msg string) {
	if s.w == nil {
		return
	}
	fmt.Fprintf(s.w, "\r\x1b[K%s", msg)
	s.shown = true
}

func (s *status) clear() {
	if s.w != nil && s.shown {
		fmt.Fprint(s.w, "\r\x1b[K")
		s.shown = false
	}
}

func (a *app) run(ctx context.Context, o *options) error {
	if o.replay != "" {
		return a.runReplay(ctx, o)
	}
	if o.lb != nil {
		return a.runLlamaBenchStyle(ctx, o)
	}
	for _, path := range o.models {
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && len(o.models) == 1 && filepath.Base(path) == defaultModel {
			return fmt.Errorf("model file %s does not exist: run make bench-models, or give a model with -m", path)
		}
		if err := cli.CheckModelFile("-m", path); err != nil {
			return err
		}
	}
	out := a.stdout
	if o.jsonPath == "-" {
		out = a.stderr
	}
	st := &status{}
	if a.stderrTerminal && !o.quiet {
		st.w = a.stderr
	}
	tab := &table{w: out}
	rep := &report{Schema: reportSchema, Time: time.Now().UTC().Truncate(time.Second), Version: cli.BuildVersion(),
		Machine: describeMachine(),
		Settings: settings{Threads: o.threads, GPULayers: o.gpuLayers, Repetitions: o.reps, PromptLengths: o.promptLengths,
			PromptTokens: o.promptTokens, NewTokens: o.newTokens, BatchRows: o.batchRows, Beams: o.beams,
			SamplerIterations: o.samplerIters, LlamaBench: o.llamaBench}}
	if rep.Settings.BatchRows == nil {
		rep.Settings.BatchRows = []int{}
	}
	if rep.Settings.Beams == nil {
		rep.Settings.Beams = []int{}
	}
	st.set("measuring the memory bandwidth")
	rep.Machine.Bandwidth = measureBandwidth(o.bandwidthMB<<20, 5)
	st.clear()
	tab.machine(rep.Machine, o.threads, rep.Version)

	for _, path := range o.models {
		mr, err := a.benchModel(ctx, o, path, rep.Machine.Bandwidth, tab, st)
		st.clear()
		if err != nil {
			return err
		}
		rep.Models = append(rep.Models, *mr)
	}
	if o.jsonPath != "" {
		if err := writeJSON(o.jsonPath, a.stdout, rep); err != nil {
			return err
		}
	}
	if o.chartPath != "" {
		if err := writeChart(o.chartPath, buildChart(rep)); err != nil {
			return fmt.Errorf("--chart: %w", err)
		}
		fmt.Fprintf(out, "\nchart: %s\n", o.chartPath)
	}
	return nil
}

// benchModel loads one model and runs every measurement on it.
func (a *app) benchModel(ctx context.Context, o *options, path string, bandwidth float64, tab *table, st *status) (*modelReport, error) {
	var bar *cli.ProgressBar
	if st.w != nil {
		bar = cli.NewProgressBar(a.stderr, "loading "+filepath.Base(path))
	}
	m, err := cli.LoadModel(ctx, path, o.gpuLayers, bar)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	info := m.Info()
	mr := &modelReport{Path: path, File: filepath.Base(path), Description: info.Description, Label: modelLabel(info.Description, info.Params),
		Quantization: quantization(info.Description), SizeBytes: info.Size, Params: info.Params,
		VocabSize: info.VocabSize, Layers: info.Layers, Device: cli.DeviceSummary(o.gpuLayers, info.Layers),
		BytesPerToken: bytesPerToken(path, info.Size), Results: []result{}, Sampler: []samplerResult{}}
	if mr.Device == "CPU" && bandwidth > 0 && mr.BytesPerToken > 0 {
		mr.BoundTokensPerS = bandwidth / float64(mr.BytesPerToken)
		llc := lastLevelCache(cpuCacheDir)
		mr.CacheResident = llc.Bytes > 0 && mr.BytesPerToken <= llc.Bytes
	}
	var cmp *comparison
	if o.llamaBench != "" && !o.speculativeOnly() {
		cmp = &comparison{o: o, model: path, llamaBench: o.llamaBench, batchedBench: findBatchedBench(o.llamaBench)}
	}
	tab.model(mr, o.threads, cmp != nil)

	b := &bench{o: o, model: m, vocab: info.VocabSize, rng: rand.New(rand.NewPCG(1, 2))}
	b.status = func(name string) { st.set(fmt.Sprintf("%s: measuring %s", mr.File, name)) }
	b.report = func(r result) {
		st.clear()
		if r.Group == groupGeneration && r.Rows == 1 && mr.BoundTokensPerS > 0 {
			f := r.TokensPerS.Median / mr.BoundTokensPerS
			r.BoundFraction = &f
		}
		if test := r.llamaBenchTest(); cmp != nil && test != "" {
			if row, ok := cmp.measured.find(test, o.threads); ok && row.TokensPerS.Median > 0 {
				ratio := pairedRatio(r.TokensPerS.Samples, row.TokensPerS.Samples)
				r.LlamaCpp, r.Ratio = &row.TokensPerS, &ratio
			}
		}
		tab.result(r)
		mr.Results = append(mr.Results, r)
	}
	if cmp != nil {
		b.pace = func(step string) error {
			tool := "llama-bench"
			if step == compareBatched {
				tool = batchedBenchName
			}
			st.set(fmt.Sprintf("%s: running %s beside the %s rows", mr.File, tool, step))
			defer st.clear()
			return cmp.run(ctx, step)
		}
	}
	steps := []func(context.Context) error{b.promptProcessing, b.generation, b.batched, b.beams}
	if o.speculativeOnly() {
		steps = []func(context.Context) error{b.speculative}
	}
	for _, measure := range steps {
		if err := measure(ctx); err != nil {
			return nil, err
		}
	}
	if cmp != nil {
		mr.LlamaBenchBuild = cmp.measured.Build
		if mr.LlamaBenchBuild == "" {
			mr.LlamaBenchBuild = "unknown"
		}
		if len(o.batchRows) > 0 {
			mr.LlamaBatchedBench = cmp.batchedBench
		}
	}
	if o.speculativeOnly() {
		return mr, nil
	}
	tab.comparison(mr, o)
	b.status("the samplers")
	sr, err := b.samplers(ctx)
	if err != nil {
		return nil, err
	}
	st.clear()
	mr.Sampler = sr
	tab.samplers(sr)
	return mr, nil
}

// quantization is the weight type at the end of llama.cpp's description
// ("llama 1B Q8_0").
func quantization(desc string) string {
	f := strings.Fields(desc)
	if len(f) == 0 {
		return "unknown"
	}
	return f[len(f)-1]
}
