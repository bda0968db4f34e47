package main

import (
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// defaultModel is the generated benchmark model llamabench runs when no
// -m is given, looked up in --models.
const defaultModel = "bench-small-q8_0.gguf"

// options is the parsed command line.
type options struct {
	models    []string
	modelsDir string

	reps          int
	promptLengths []int
	promptTokens  int
	newTokens     int
	batchRows     []int
	beams         []int
	samplerIters  int
	bandwidthMB   int

	// threads and gpuLayers are the table's: the one value of their grids
	threads      int
	gpuLayers    int
	threadGrid   intGrid
	gpuLayerGrid intGrid

	// lb holds llama-bench's options; nil unless one of them starts the
	// llama-bench-style run (see llamaBenchStyle).
	lb *lbOptions

	replay     string
	llamaBench string
	settle     time.Duration

	draft          string
	draftTokens    int
	draftThreshold float64
	promptLookup   int

	jsonPath  string
	chartPath string
	quiet     bool
	help      bool
	version   bool
}

// intList is a comma-separated list of positive integers.
type intList []int

func (l *intList) String() string {
	var s []string
	for _, n := range *l {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return fmt.Errorf("not a comma-separated list of positive integers")
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// stringList collects a repeatable option whose values may also be
// comma-separated, as llama-bench's -m.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error {
	for _, f := range strings.Split(v, ",") {
		if f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

var usageGroups = []cli.Group{
	{Title: "Models", Flags: []string{"m,model", "models"}},
	{Title: "Measurements", Flags: []string{"r,repetitions", "pp", "prompt", "tg", "batch", "beams", "sampler-iters", "bandwidth-mb"}},
	{Title: "Runtime", Flags: []string{"t,threads", "ngl,n-gpu-layers,gpu-layers", "replay"}},
	{Title: "llama-bench's options (any of them makes the llama-bench-style run)", Flags: []string{
		"p,n-prompt", "n,n-gen", "pg", "d,n-depth", "b,batch-size", "ub,ubatch-size", "fa,flash-attn",
		"ctk,cache-type-k", "ctv,cache-type-v", "o,output"}},
	{Title: "Comparison", Flags: []string{"llama-bench", "settle"}},
	{Title: "Speculative decoding", Flags: []string{"draft", "draft-tokens", "draft-threshold", "prompt-lookup"}},
	{Title: "Output", Flags: []string{"json", "chart", "quiet", "version", "h,help"}},
}

const usageHead = `llamabench measures llama.cpp through llamaloop on this machine.

Usage:
  llamabench                         the generated benchmark model, build/models/` + defaultModel + `
  llamabench -m model.gguf [-m ...]  given GGUF models
  llamabench --json out.json --chart out.svg
  llamabench -m model.gguf -p 512 -n 128 -t 1,2 -o csv   llama-bench's options: its tests

For each model it measures, repeating each measurement -r times and reporting
the median and the minimum:
  - prompt processing (tokens/s) for each --pp length, up to the first token:
    the raw llama_decode loop (and the argmax of the logits it waits for) and
    the decoding loop of package generation;
  - generation (tokens/s after the first token, --tg tokens from a --prompt
    token prompt): the raw decode loop (argmax in Go), greedy, the default
    sampling chain and Mirostat v2 through package generation;
  - batched greedy generation with each --batch row count (total tokens/s);
  - beam search with each --beams count (tokens/s of the returned sequence);
  - the cost of choosing one token from a logits row of the model's vocabulary,
    in microseconds: llamaloop (Go) beside llama.cpp's own samplers.
The sampling chain is repetition penalty 1.1, temperature 0.8, top-k 40,
top-p 0.95 on both sides (llama.cpp's penalty covers the last 64 tokens).

It measures the memory bandwidth once (a parallel copy) and prints generation
speed as a fraction of the bound bandwidth / bytes of weights read per token.
With a GPU backend (make cuda, or Metal) the layers are offloaded (--gpu-layers)
and the table names the GPU that ran them; the bound then is not given.
The table goes to stdout (to stderr with --json -), progress to stderr.

With --replay profile.json no model is loaded: every Eval waits as long as the
profiled device took (per step and row count, per prompt token) and returns
real-sized rows of a fixed random model, so that the Go side of the loop is
measured beside that device on any machine. Every measurement runs twice, the
wait sleeping (no core used) and spinning (the thread running when the device
finishes, as CUDA's default schedule has it), both in the table. It reports,
interleaved over the repetitions, greedy, the sampling chain and Mirostat v2
against the raw decode loop, beam search (decoded tokens/s) against batched
greedy with as many rows, and the prompt through generation against the raw
prompt evaluation, beside the ratios measured on the device where the profile
has them.

With --llama-bench PATH it runs llama.cpp's own llama-bench on each model
(the same prompt lengths, --tg after --prompt tokens as llama-bench's depth
-d, the same threads), one run just before each of the matching rows'
repetitions, which follow untimed repetitions for --settle, as
llama-bench's measurement follows its warm-up, each sample just after an
untimed run of its own row, as each of llama-bench's repetitions follows
one of the same test (the run repeats each test 4
times and its last repetition pairs: a process's first half second of work
runs slow on some virtual machines), and adds its tokens/s and the
ratio llamaloop / llama.cpp to the raw decode rows: the median of the ratios
of those pairs. When llama-batched-bench lies beside it,
it also runs that on the batch rows (the same --prompt and --tg, a KV cache of
the same size) and sets its generation speed beside them. Build both from the
llama.cpp commit that llamabench --version names for a fair ratio.

With any of llama-bench's own options, -p -n -pg -d -b -ub -fa -ctk -ctv or -o,
it runs llama-bench's tests instead, as llama-bench runs them, on llamaloop's
llamacpp package: every combination of the values given (a list such as
128,512, or a range first-last, first-last+step or first-last*mult; -m, -t and
-ngl take several too), each test in a context of its own after a warm-up, and
-r times: the -p prompt tokens in batches of -b and the -n tokens generated one
a decode, timed together, after the -d tokens already in the KV cache. The -o
format has llama-bench's fields (md: its table, t/s the mean ± the standard
deviation) and llamabench's own: llamaloop, portable_build, median_ts, min_ts.
The defaults are llama-bench's, -p 512 -n 128 -d 0 -b 2048 -ub 512 -fa 0
-ctk f16 -ctv f16 -r 5, but for the threads (all cores) and -ngl (-1: every
layer); the table's options are refused there.

With --draft FILE or --prompt-lookup N it measures speculative decoding only
(a generator with the draft model, or prompt lookup): --tg tokens from a --prompt token prompt, greedy and with
the sampling chain, plainly and speculatively, interleaved on the same prompts,
with the speed-up, the acceptance rate (accepted / drafted candidates) and the
mean number of accepted candidates per evaluation of the model.
`

func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("llamabench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	o.promptLengths = []int{128, 512}
	o.batchRows = []int{1, 2, 4, 8, 16}
	o.beams = []int{2, 4, 8}
	for _, n := range []string{"m", "model"} {
		fs.Var((*stringList)(&o.models), n, "a GGUF model `FILE` to measure (repeatable)")
	}
	fs.StringVar(&o.modelsDir, "models", "build/models", "without -m, measure `DIR`/"+defaultModel+" (written by make bench-models)")
	for _, n := range []string{"r", "repetitions"} {
		fs.IntVar(&o.reps, n, 5, "repeat each measurement `N` times (1 to 10000)")
	}
	fs.Var((*intList)(&o.promptLengths), "pp", "prompt processing `LENGTHS`, comma-separated")
	fs.IntVar(&o.promptTokens, "prompt", 32, "prompt length `N` of the generation, batch and beam measurements")
	fs.IntVar(&o.newTokens, "tg", 32, "tokens `N` to generate after the first")
	fs.Var((*intList)(&o.batchRows), "batch", "batched generation `ROWS`, comma-separated, 1 to 256 each")
	fs.Var((*intList)(&o.beams), "beams", "beam search `BEAMS`, comma-separated, 2 to 256 each")
	fs.IntVar(&o.samplerIters, "sampler-iters", 200, "tokens `N` chosen per sampler measurement")
	fs.IntVar(&o.bandwidthMB, "bandwidth-mb", 256, "size `MB` of the memory bandwidth copy (0: skip it); its two buffers must fit in half the memory available")
	o.threadGrid = intGrid{vals: []int{runtime.NumCPU()}}
	for _, n := range []string{"t", "threads"} {
		fs.Var(&o.threadGrid, n, "CPU `THREADS`, 1 to 512 (the llama-bench-style run takes a grid: 1,2 or 1-8*2); more than the CPUs available is allowed with a warning")
		fs.Lookup(n).DefValue = fmt.Sprintf("all cores, %d", runtime.NumCPU())
	}
	o.gpuLayerGrid = intGrid{vals: []int{-1}, negative: true}
	for _, n := range []string{"ngl", "n-gpu-layers", "gpu-layers"} {
		fs.Var(&o.gpuLayerGrid, n, "layers to offload to a GPU (`N`, -1: all; a grid in the llama-bench-style run); ignored without a GPU backend")
	}
	lbFlags(fs, o)
	fs.StringVar(&o.replay, "replay", "", "no model: measure the loop's ratios to the raw decode loop on replay backends that wait as the device of profile `FILE` (JSON, e.g. internal/replay/testdata/h200.json)")
	fs.StringVar(&o.llamaBench, "llama-bench", "", "run llama.cpp's llama-bench binary at `PATH` on the same models and threads and print the ratio to it")
	fs.DurationVar(&o.settle, "settle", 2*time.Second, "with --llama-bench, after each run of llama.cpp's tools repeat the untimed warm-up of the rows it pairs with for `DURATION` (up to 1m; at least once): "+
		"on this project's virtual machine a process that has just run a child computes up to a third slower for its next half second of work, however long it waits first")
	fs.StringVar(&o.draft, "draft", "", "measure only speculative decoding beside plain decoding, with the draft model `FILE`")
	fs.IntVar(&o.draftTokens, "draft-tokens", 5, "candidates `N` the draft model proposes per step (num_assistant_tokens)")
	fs.Float64Var(&o.draftThreshold, "draft-threshold", 0.4, "the draft stops after a token it gives a probability below `P` (assistant_confidence_threshold)")
	fs.IntVar(&o.promptLookup, "prompt-lookup", 0, "measure only speculative decoding beside plain decoding, with prompt lookup of `N` tokens")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to `FILE` (- for stdout)")
	fs.StringVar(&o.chartPath, "chart", "", "draw tokens/s by batch rows and by beams to `FILE`.svg or FILE.png")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress on stderr")
	cli.CommonFlags(fs, &o.version, &o.help)
	return fs
}

// parseArgs parses the command line; help is printed to out and reported
// as flag.ErrHelp.
func parseArgs(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o)
	if err := cli.Parse(fs, args, &o.help, out, usageHead, usageGroups); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %q (give models with -m)", fs.Arg(0))
	}
	if len(o.models) == 0 {
		o.models = []string{filepath.Join(o.modelsDir, defaultModel)}
	}
	if err := o.chooseMode(fs); err != nil {
		return nil, err
	}
	if o.lb != nil {
		return o, o.lb.check(o)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	if o.chartPath != "" {
		switch strings.ToLower(filepath.Ext(o.chartPath)) {
		case ".svg", ".png":
		default:
			return nil, cli.Usagef("--chart %s: the file must end in .svg or .png", o.chartPath)
		}
	}
	return o, nil
}

// Bounds of the options that size an allocation or a run, checked before
// anything is measured.
const (
	maxReps      = 10000
	maxIters     = 1 << 24
	maxSequences = 256 // llama.cpp's LLAMA_MAX_SEQ
)

// check bounds every numeric option, naming it: sizes are checked here so
// that no buffer or context is allocated for a value that cannot work.
func (o *options) check() error {
	// The generation context holds the prompt, the new tokens and 256 spare cells.
	maxLen := cli.MaxCells - 256
	switch {
	case o.reps < 1 || o.reps > maxReps:
		return cli.Usagef("-r %d: must be from 1 to %d", o.reps, maxReps)
	case o.promptTokens < 1 || o.promptTokens > maxLen:
		return cli.Usagef("--prompt %d: must be from 1 to %d tokens", o.promptTokens, maxLen)
	case o.newTokens < 1 || o.newTokens > maxLen:
		return cli.Usagef("--tg %d: must be from 1 to %d tokens", o.newTokens, maxLen)
	case o.promptTokens+o.newTokens > maxLen:
		return cli.Usagef("--prompt %d and --tg %d: together at most %d tokens", o.promptTokens, o.newTokens, maxLen)
	case o.samplerIters < 1 || o.samplerIters > maxIters:
		return cli.Usagef("--sampler-iters %d: must be from 1 to %d", o.samplerIters, maxIters)
	case len(o.promptLengths) == 0:
		return cli.Usagef("--pp: give at least one prompt length")
	case o.gpuLayers < -1:
		return cli.Usagef("--gpu-layers %d: must be -1 (all) or from 0 up", o.gpuLayers)
	case o.draftTokens < 1 || o.draftTokens > maxLen:
		return cli.Usagef("--draft-tokens %d: must be from 1 to %d", o.draftTokens, maxLen)
	case o.draftThreshold < 0 || o.draftThreshold > 1 || o.draftThreshold != o.draftThreshold:
		return cli.Usagef("--draft-threshold %g: must be in [0, 1]", o.draftThreshold)
	case o.promptLookup < 0 || o.promptLookup > maxLen:
		return cli.Usagef("--prompt-lookup %d: must be 0 (off) or up to %d", o.promptLookup, maxLen)
	case o.settle < 0 || o.settle > time.Minute:
		return cli.Usagef("--settle %s: must be from 0 to 1m", o.settle)
	}
	for _, n := range o.promptLengths {
		if n > maxLen {
			return cli.Usagef("--pp %d: a prompt length must be from 1 to %d tokens", n, maxLen)
		}
	}
	for _, n := range o.batchRows {
		if n > maxSequences {
			return cli.Usagef("--batch %d: llama.cpp decodes at most %d rows together", n, maxSequences)
		}
	}
	for _, n := range o.beams {
		if n < 2 || n > maxSequences {
			return cli.Usagef("--beams %d: beam search takes from 2 to %d beams", n, maxSequences)
		}
	}
	if err := cli.CheckThreads(o.threads); err != nil {
		return err
	}
	avail, _ := llamacpp.AvailableMemory()
	return checkBandwidthMB(o.bandwidthMB, avail)
}

// checkBandwidthMB bounds --bandwidth-mb: the copy allocates two buffers of
// that size, which must fit in half the memory available (limit bytes, 0
// when unknown) so that the measurement does not swap or die.
func checkBandwidthMB(mb int, limit uint64) error {
	const most = 1 << 20 // 1 TiB: beyond any machine, and no overflow of mb<<20
	switch {
	case mb < 0 || mb > most:
		return cli.Usagef("--bandwidth-mb %d: must be from 0 (no measurement) to %d", mb, most)
	case limit > 0 && 2*uint64(mb)<<20 > limit/2:
		return cli.Usagef("--bandwidth-mb %d: the copy needs two buffers of %d MB, more than half of the %s of memory available now; use at most %d",
			mb, mb, llamacpp.FormatBytes(limit), limit/4>>20)
	}
	return nil
}
