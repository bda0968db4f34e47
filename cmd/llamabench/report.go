package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
)

// reportSchema names the layout of the JSON report.
const reportSchema = "llamabench/1"

// report is the JSON document of --json.
type report struct {
	Schema   string        `json:"schema"`
	Time     time.Time     `json:"time"`
	Version  cli.Version   `json:"version"`
	Machine  machine       `json:"machine"`
	Settings settings      `json:"settings"`
	Models   []modelReport `json:"models"`
}

// settings are the parameters of the run.
type settings struct {
	Threads           int   `json:"threads"`
	GPULayers         int   `json:"gpu_layers"`
	Repetitions       int   `json:"repetitions"`
	PromptLengths     []int `json:"prompt_lengths"`
	PromptTokens      int   `json:"prompt_tokens"`
	NewTokens         int   `json:"new_tokens"`
	BatchRows         []int `json:"batch_rows"`
	Beams             []int `json:"beams"`
	SamplerIterations int   `json:"sampler_iterations"`
	// LlamaBench is the llama-bench binary compared against ("": none).
	LlamaBench string `json:"llama_bench,omitempty"`
}

// modelReport holds one model's description and measurements.
type modelReport struct {
	Path        string `json:"path"`
	File        string `json:"file"`
	Description string `json:"description"`
	// Label is Description with the parameter count for llama.cpp's "?B".
	Label        string `json:"label"`
	Quantization string `json:"quantization"`
	SizeBytes    uint64 `json:"size_bytes"`
	Params       uint64 `json:"params"`
	VocabSize    int    `json:"vocab_size"`
	Layers       int    `json:"layers"`
	// Device is "CPU" or the GPU that held the offloaded layers.
	Device string `json:"device"`
	// BytesPerToken is the weight bytes one decoded token reads.
	BytesPerToken uint64 `json:"bytes_per_token"`
	// BoundTokensPerS is memory bandwidth / BytesPerToken (CPU runs with a
	// measured bandwidth only).
	BoundTokensPerS float64 `json:"bound_tokens_per_s,omitempty"`
	// CacheResident: the weights one token reads fit in the last-level
	// cache, so generation may beat the memory-bandwidth bound.
	CacheResident bool `json:"cache_resident,omitempty"`
	// LlamaBenchBuild is the build_commit of the llama-bench run on this
	// model (with --llama-bench).
	LlamaBenchBuild string `json:"llama_bench_build,omitempty"`
	// LlamaBatchedBench is the llama-batched-bench binary that the batch
	// rows were compared against: the one beside --llama-bench ("": none).
	LlamaBatchedBench string          `json:"llama_batched_bench,omitempty"`
	Results           []result        `json:"results"`
	Sampler           []samplerResult `json:"sampler"`
}

func writeJSON(path string, stdout io.Writer, r any) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if path == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("--json: %w", err)
	}
	return nil
}

// table writes the human-readable results, one line per measurement as it
// completes.
type table struct {
	w          io.Writer
	headerDone bool
	// compared: the current model has llama-bench columns
	compared bool
	// resident: the current model fits in the last-level cache, whose size
	// llc is; its bound fractions carry a footnote mark
	resident bool
	llc      cpuCache
}

func (t *table) machine(m machine, threads int, v cli.Version) {
	fmt.Fprintf(t.w, "llamabench: %s\n", v)
	fmt.Fprintf(t.w, "machine: %s, %d cores, %s/%s", m.CPU, m.Cores, m.OS, m.Arch)
	for _, g := range m.GPUs {
		fmt.Fprintf(t.w, "; GPU %s (%s)", g.Description, formatBytes(float64(g.MemoryBytes)))
	}
	fmt.Fprintln(t.w)
	if m.Bandwidth > 0 {
		fmt.Fprintf(t.w, "memory bandwidth: %s/s (parallel copy, read + write)\n", formatBytes(m.Bandwidth))
	}
	fmt.Fprintf(t.w, "threads: %d\n", threads)
	if m.Build.portable() {
		fmt.Fprintln(t.w, m.Build.note())
	}
	t.llc = m.LastLevelCache
}

// model starts a model's table; compared says whether it has llama.cpp's
// columns.
func (t *table) model(mr *modelReport, threads int, compared bool) {
	fmt.Fprintf(t.w, "\nmodel %s: %s, %s of weights, %s parameters, vocabulary %d\n", mr.File, mr.Label,
		formatBytes(float64(mr.SizeBytes)), formatCount(float64(mr.Params)), mr.VocabSize)
	fmt.Fprintf(t.w, "ran on %s", mr.Device)
	if mr.Device == "CPU" {
		fmt.Fprintf(t.w, " (%s)", plural(threads, "thread"))
	}
	if mr.BoundTokensPerS > 0 {
		fmt.Fprintf(t.w, "; bandwidth bound %.1f tokens/s (%s read per token)", mr.BoundTokensPerS, formatBytes(float64(mr.BytesPerToken)))
	}
	fmt.Fprintln(t.w)
	t.headerDone = false
	t.compared = compared
	t.resident = mr.CacheResident
}

func (t *table) result(r result) {
	if !t.headerDone {
		fmt.Fprintf(t.w, "\n%-26s %12s %12s %9s", "measurement", "median t/s", "min t/s", "of bound")
		if t.compared {
			fmt.Fprintf(t.w, " %12s %7s", "llama.cpp", "ratio")
		}
		fmt.Fprintf(t.w, "  %s\n", "note")
		t.headerDone = true
	}
	bound := ""
	if r.BoundFraction != nil {
		bound = fmt.Sprintf("%.0f%%", 100**r.BoundFraction)
		if t.resident {
			bound += "*"
		}
	}
	upstream, ratio := "", ""
	if r.LlamaCpp != nil && r.Ratio != nil {
		upstream, ratio = fmt.Sprintf("%.1f", r.LlamaCpp.Median), fmt.Sprintf("%.2f", *r.Ratio)
	}
	note := ""
	switch {
	case r.PerRowTokensPerS != nil:
		note = fmt.Sprintf("%.1f t/s per row", r.PerRowTokensPerS.Median)
	case r.DecodedTokensPerS != nil:
		note = fmt.Sprintf("%.1f t/s decoded", r.DecodedTokensPerS.Median)
	case r.Speculation != nil:
		note = r.Speculation.note()
	}
	fmt.Fprintf(t.w, "%-26s %12.1f %12.1f %9s", r.Name, r.TokensPerS.Median, r.TokensPerS.Min, bound)
	if t.compared {
		fmt.Fprintf(t.w, " %12s %7s", upstream, ratio)
	}
	fmt.Fprintf(t.w, "  %s\n", note)
}

// comparison says under a model's measurements what they were compared
// with: llama-bench's build and what the ratio is, or how to get one.
func (t *table) comparison(mr *modelReport, o *options) {
	if mr.CacheResident && mr.BoundTokensPerS > 0 {
		fmt.Fprintf(t.w, "\n* the %s of weights read per token fit in the %s L%d cache: generation reads them from the cache, "+
			"and the memory-bandwidth bound does not hold (above 100%% is no error); a model larger than the cache measures the bound\n",
			formatBytes(float64(mr.BytesPerToken)), formatBytes(float64(t.llc.Bytes)), t.llc.Level)
	}
	if mr.LlamaBenchBuild == "" {
		fmt.Fprintln(t.w, "\nllama.cpp: not compared; --llama-bench PATH runs llama.cpp's llama-bench on the same model and threads")
		return
	}
	fmt.Fprintf(t.w, "\nllama.cpp: %s (build %s), same model, %s, %s of %d repetitions, the last of each just before one of llamaloop's; "+
		"ratio = median of llamaloop / llama.cpp over those pairs\n",
		o.llamaBench, mr.LlamaBenchBuild, plural(o.threads, "thread"), plural(o.reps, "run"), llamaBenchReps)
	switch {
	case len(o.batchRows) == 0:
	case mr.LlamaBatchedBench != "":
		fmt.Fprintf(t.w, "batch rows: against %s, its generation speed (S_TG) after the same prompts, in a KV cache of the same size\n",
			mr.LlamaBatchedBench)
	default:
		fmt.Fprintf(t.w, "batch rows: not compared; no %s beside %s\n", batchedBenchName, o.llamaBench)
	}
}

func (t *table) samplers(rs []samplerResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(t.w, "\n%-26s %12s %12s   (µs per token, vocabulary %d; median, min)\n", "choosing a token", "llamaloop", "llama.cpp", rs[0].VocabSize)
	for _, r := range rs {
		fmt.Fprintf(t.w, "%-26s %12s %12s\n", r.Name, fmt.Sprintf("%.1f, %.1f", r.Llamaloop.Median, r.Llamaloop.Min),
			fmt.Sprintf("%.1f, %.1f", r.LlamaCpp.Median, r.LlamaCpp.Min))
	}
}

// formatBytes writes a byte count with a decimal unit.
func formatBytes(n float64) string {
	for _, u := range []string{"B", "kB", "MB", "GB"} {
		if n < 1000 {
			return fmt.Sprintf("%.1f %s", n, u)
		}
		n /= 1000
	}
	return fmt.Sprintf("%.1f TB", n)
}

// formatCount writes a count with M or B.
func formatCount(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f M", n/1e6)
	}
	return fmt.Sprintf("%.0f", n)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
