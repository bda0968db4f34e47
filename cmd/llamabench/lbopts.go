package main

import (
	"flag"
	"slices"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// lbOptions are llama-bench's test parameters: every combination of their
// values is one test per prompt length, generation length and -pg pair,
// as llama-bench runs them. The defaults are llama-bench's, but for the
// threads (llamabench's --threads default) and the GPU layers (-1, every
// layer, where llama-bench says 99).
type lbOptions struct {
	prompts, gens, depths intGrid
	pairs                 pairGrid
	batches, ubatches     intGrid
	flashAttn             boolGrid
	typeK, typeV          kvGrid
	output                string
}

// The output formats of -o, llama-bench's.
var lbFormats = []string{"md", "csv", "json", "jsonl", "sql"}

// lbFlags defines llama-bench's options that llamabench's table has no
// counterpart of; -m, -r, -t and -ngl are common to both.
func lbFlags(fs *flag.FlagSet, o *options) {
	lb := &lbOptions{
		prompts: intGrid{vals: []int{512}}, gens: intGrid{vals: []int{128}}, depths: intGrid{vals: []int{0}},
		batches: intGrid{vals: []int{2048}}, ubatches: intGrid{vals: []int{512}}, flashAttn: boolGrid{vals: []bool{false}},
		typeK: kvGrid{vals: []llamacpp.KVType{llamacpp.KVF16}}, typeV: kvGrid{vals: []llamacpp.KVType{llamacpp.KVF16}},
	}
	o.lb = lb // chooseMode drops it when none of its options is given
	grid := func(v flag.Value, usage string, names ...string) {
		for _, n := range names {
			fs.Var(v, n, usage)
		}
	}
	grid(&lb.prompts, "prompt processing tests of `N` tokens (a grid: 128,512 or 64-512*2; 0: none)", "p", "n-prompt")
	grid(&lb.gens, "generation tests of `N` tokens (a grid; 0: none)", "n", "n-gen")
	fs.Var(&lb.pairs, "pg", "a test of a prompt then generation, timed together: `PP,TG` (repeatable)")
	grid(&lb.depths, "`N` tokens in the KV cache before each test (a grid)", "d", "n-depth")
	grid(&lb.batches, "logical batch size `N`, the most tokens one decode carries (a grid)", "b", "batch-size")
	grid(&lb.ubatches, "physical batch size `N` (a grid; at most the batch size: larger is lowered to it)", "ub", "ubatch-size")
	grid(&lb.flashAttn, "flash attention, `0|1` (a grid: 0,1)", "fa", "flash-attn")
	grid(&lb.typeK, "KV cache key type `T`: f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl (a grid)", "ctk", "cache-type-k")
	grid(&lb.typeV, "KV cache value type `T` (a grid; a quantized one needs -fa 1)", "ctv", "cache-type-v")
	for _, n := range []string{"o", "output"} {
		fs.StringVar(&lb.output, n, "md", "output `FORMAT`: md, csv, json, jsonl or sql, with llama-bench's fields")
	}
}

// The options that belong to one mode only, as the flag package names them.
var (
	lbOnlyFlags = []string{"p", "n-prompt", "n", "n-gen", "pg", "d", "n-depth", "b", "batch-size", "ub", "ubatch-size",
		"fa", "flash-attn", "ctk", "cache-type-k", "ctv", "cache-type-v", "o", "output"}
	tableOnlyFlags = []string{"pp", "prompt", "tg", "batch", "beams", "sampler-iters", "bandwidth-mb", "replay",
		"llama-bench", "settle", "draft", "draft-tokens", "draft-threshold", "prompt-lookup", "json", "chart"}
)

// chooseMode decides between the table and the llama-bench-style run: any
// of llama-bench's own options (-p, -n, -pg, -d, -b, -ub, -fa, -ctk, -ctv,
// -o) starts the latter, which refuses the table's options; -m, -r, -t and
// -ngl belong to both, and the table takes one thread count and one GPU
// layer count.
func (o *options) chooseMode(fs *flag.FlagSet) error {
	var lbGiven, tableGiven string
	fs.Visit(func(f *flag.Flag) {
		if lbGiven == "" && slices.Contains(lbOnlyFlags, f.Name) {
			lbGiven = f.Name
		}
		if tableGiven == "" && slices.Contains(tableOnlyFlags, f.Name) {
			tableGiven = f.Name
		}
	})
	if lbGiven == "" {
		o.lb = nil
		for _, g := range []struct {
			name string
			grid *intGrid
			dst  *int
		}{{"--threads", &o.threadGrid, &o.threads}, {"--gpu-layers", &o.gpuLayerGrid, &o.gpuLayers}} {
			if len(g.grid.vals) != 1 {
				return cli.Usagef("%s %s: the table measures one value; a grid of them is the llama-bench-style run (give -p, -n or -o too)",
					g.name, g.grid)
			}
			*g.dst = g.grid.vals[0]
		}
		return nil
	}
	if tableGiven != "" {
		return cli.Usagef("%s is an option of llamabench's table; %s starts the llama-bench-style run, which does not take it",
			spell(tableGiven), spell(lbGiven))
	}
	return nil
}

// spell writes a flag name as a user types it: -p, -ngl, --n-prompt.
func spell(name string) string {
	if len(name) <= 3 && name != "pp" && name != "tg" {
		return "-" + name
	}
	return "--" + name
}

// check bounds llama-bench's options and the grid they make.
func (lb *lbOptions) check(o *options) error {
	maxLen := cli.MaxCells - 256
	if o.reps < 1 || o.reps > maxReps {
		return cli.Usagef("-r %d: must be from 1 to %d", o.reps, maxReps)
	}
	if !slices.Contains(lbFormats, lb.output) {
		return cli.Usagef("-o %s: the output format must be md, csv, json, jsonl or sql", lb.output)
	}
	for _, t := range o.threadGrid.vals {
		if t < 1 || t > llamacpp.MaxThreads {
			return cli.Usagef("-t %d: must be from 1 to %d", t, llamacpp.MaxThreads)
		}
	}
	for _, n := range o.gpuLayerGrid.vals {
		if n < -1 {
			return cli.Usagef("-ngl %d: must be -1 (all) or from 0 up", n)
		}
	}
	for _, g := range []struct {
		name string
		vals []int
	}{{"-b", lb.batches.vals}, {"-ub", lb.ubatches.vals}} {
		for _, v := range g.vals {
			if v < 1 || v > 1<<20 {
				return cli.Usagef("%s %d: must be from 1 to %d", g.name, v, 1<<20)
			}
		}
	}
	tests := lb.tests()
	for _, t := range tests {
		for _, d := range lb.depths.vals {
			if t.prompt+t.gen+d > maxLen {
				return cli.Usagef("%s: the test and its depth take %d tokens, more than %d", t.name(d), t.prompt+t.gen+d, maxLen)
			}
		}
	}
	for _, kv := range lb.typeV.vals {
		if kv.Quantized() && slices.Contains(lb.flashAttn.vals, false) {
			return cli.Usagef("-ctv %s with -fa 0: a quantized V cache needs flash attention (-fa 1)", kv)
		}
	}
	n := len(o.models) * len(o.gpuLayerGrid.vals) * len(lb.batches.vals) * len(lb.ubatches.vals) * len(lb.typeK.vals) *
		len(lb.typeV.vals) * len(lb.flashAttn.vals) * len(o.threadGrid.vals) * len(lb.depths.vals) * len(tests)
	switch {
	case n == 0:
		return cli.Usagef("no test to run: every -p, -n and -pg is 0 or empty")
	case n > maxLBTests:
		return cli.Usagef("the options make %d tests; at most %d", n, maxLBTests)
	}
	return nil
}

// maxLBTests bounds the tests one llama-bench-style run makes.
const maxLBTests = 100000

// lbTestShape is a test's token counts, before its depth.
type lbTestShape struct{ prompt, gen int }

// name is llama-bench's: pp512, tg128, pp512+tg128, with " @ d4096" at a
// depth.
func (t lbTestShape) name(depth int) string { return testName(t.prompt, t.gen, depth) }

// tests lists the shapes as llama-bench orders them: every -p, every -n,
// every -pg, skipping zeros.
func (lb *lbOptions) tests() []lbTestShape {
	var out []lbTestShape
	for _, p := range lb.prompts.vals {
		if p > 0 {
			out = append(out, lbTestShape{prompt: p})
		}
	}
	for _, g := range lb.gens.vals {
		if g > 0 {
			out = append(out, lbTestShape{gen: g})
		}
	}
	for _, pg := range lb.pairs {
		if pg[0] > 0 || pg[1] > 0 {
			out = append(out, lbTestShape{prompt: pg[0], gen: pg[1]})
		}
	}
	return out
}
