package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// llamaBenchRun is what one run of llama.cpp's llama-bench measured.
type llamaBenchRun struct {
	// Build is llama-bench's build_commit (its markdown footer's build).
	Build string
	Rows  []llamaBenchRow
}

// llamaBenchRow is one llama-bench test.
type llamaBenchRow struct {
	// Test is llama-bench's name for it: pp512, tg128, pp512+tg128 (with
	// " @ d4096" when it ran at a depth).
	Test    string
	Threads int
	// TokensPerS is built from the repetitions' tokens/s when the output
	// lists them (JSON); from the mean alone otherwise (markdown).
	TokensPerS stat
}

// find returns the row of test at threads threads.
func (r *llamaBenchRun) find(test string, threads int) (llamaBenchRow, bool) {
	for _, row := range r.Rows {
		if row.Test == test && (row.Threads == threads || row.Threads == 0) {
			return row, true
		}
	}
	return llamaBenchRow{}, false
}

// llamaBenchArgs are the arguments of the llama-bench runs that measure
// what llamabench's raw rows measure, at the same threads, one repetition
// (after llama-bench's warm-up), as JSON on stdout: each prompt length from
// an empty cache, then generation of newTokens tokens after a prompt of
// promptTokens (llama-bench's depth, -d). Generating after 32 tokens is
// some 7% slower than from an empty cache (bench-small q4_0, one thread: 138
// against 148 tokens/s), so without the depth the ratio would compare two
// different things.
func llamaBenchArgs(model string, threads, gpuLayers int, pp []int, promptTokens, newTokens int) [][]string {
	lengths := make([]string, len(pp))
	for i, n := range pp {
		lengths[i] = strconv.Itoa(n)
	}
	// llama-bench's -ngl 99 is "every layer" in every version; -1 is not.
	ngl := gpuLayers
	if ngl < 0 {
		ngl = 99
	}
	// llama-bench turns flash attention off unless told (-fa 0 is its
	// default at the pinned commit and after), while llamabench's contexts,
	// as llama-server's and llama-batched-bench's, take llama.cpp's auto,
	// which turns it on wherever the backend has the operation (every CPU):
	// -fa 1 compares like with like (a perf profile of llamaloop's decode
	// shows ggml_compute_forward_flash_attn_ext; docs/measurements.md).
	common := []string{"-m", model, "-t", strconv.Itoa(threads), "-r", strconv.Itoa(llamaBenchReps), "-ngl", strconv.Itoa(ngl), "-fa", "1", "-o", "json"}
	return [][]string{
		append([]string{"-p", strings.Join(lengths, ","), "-n", "0"}, common...),
		append([]string{"-p", "0", "-n", strconv.Itoa(newTokens), "-d", strconv.Itoa(promptTokens)}, common...),
	}
}

// llamaBenchReps is the repetitions of each llama-bench run, of which the
// last pairs with llamabench's repetition: a process computes slower for
// its first half second of work on this project's virtual machine, and
// llama-bench's one warm-up run does not cover it (12 repetitions, 2
// threads, bench-small: the first tg32 5-27% below the median of the
// rest, the first f16 pp128 48% below, the second 31%; from the third on
// they are level).
const llamaBenchReps = 4

// comparison runs llama.cpp's own tools beside llamabench's measurements of
// one model: one run of one repetition just before each repetition of the
// rows that the tool measures too (bench.repeatRows), so that a machine whose
// speed drifts while llamabench runs (other work, a virtual machine's
// neighbours) slows both sides of a pair alike; a row's ratio is the median
// of its pairs' ratios (pairedRatio). On this project's 2-core virtual
// machine, running the tools first and llamabench a minute later gave
// single-run ratios from 0.62 to 1.36 for the same build.
type comparison struct {
	o                        *options
	model                    string
	llamaBench, batchedBench string // batchedBench is "" when there is none
	measured                 llamaBenchRun
}

// comparison steps: the parts of llamabench that the tools measure too.
const (
	comparePrompt     = "prompt"
	compareGeneration = "generation"
	compareBatched    = "batched"
)

// run measures one repetition with the tool that step compares with and
// adds its samples to what was measured before.
func (c *comparison) run(ctx context.Context, step string) error {
	o := c.o
	switch step {
	case comparePrompt, compareGeneration:
		args := llamaBenchArgs(c.model, o.threads, o.gpuLayers, o.promptLengths, o.promptTokens, o.newTokens)
		i := 0
		if step == compareGeneration {
			i = 1
		} else if len(o.promptLengths) == 0 {
			return nil
		}
		run, err := runLlamaBench(ctx, c.llamaBench, args[i])
		if err != nil {
			return err
		}
		if c.measured.Build == "" {
			c.measured.Build = run.Build
		}
		for i, row := range run.Rows {
			if n := len(row.TokensPerS.Samples); n > 1 {
				run.Rows[i].TokensPerS = newStat(row.TokensPerS.Samples[n-1:])
			}
		}
		c.add(run.Rows)
	case compareBatched:
		if c.batchedBench == "" || len(o.batchRows) == 0 {
			return nil
		}
		seqs := batchSequences(o.batchRows)
		measured, err := runBatchedBench(ctx, c.batchedBench, batchedBenchArgs(c.model, o.threads, o.gpuLayers,
			batchCells(seqs, o.promptTokens, o.newTokens), batchCounts(o.batchRows), o.promptTokens, o.newTokens))
		if err != nil {
			return err
		}
		c.add(measured)
	}
	return nil
}

// pairedRatio is the median of ours[i] / theirs[i], the ratios of samples
// taken one after the other, or the ratio of the medians when the two do
// not pair (llama-bench's markdown gives one mean a run, which may stand for
// several repetitions).
func pairedRatio(ours, theirs []float64) float64 {
	if len(ours) != len(theirs) || len(ours) == 0 {
		return newStat(ours).Median / newStat(theirs).Median
	}
	ratios := make([]float64, len(ours))
	for i := range ours {
		ratios[i] = ours[i] / theirs[i]
	}
	return newStat(ratios).Median
}

// add joins rows to the rows measured before, a test's samples to its own.
func (c *comparison) add(rows []llamaBenchRow) {
	for _, row := range rows {
		i := slices.IndexFunc(c.measured.Rows, func(r llamaBenchRow) bool { return r.Test == row.Test && r.Threads == row.Threads })
		if i < 0 {
			c.measured.Rows = append(c.measured.Rows, row)
			continue
		}
		prev := &c.measured.Rows[i]
		prev.TokensPerS = newStat(append(slices.Clone(prev.TokensPerS.Samples), row.TokensPerS.Samples...))
	}
}

// runLlamaBench runs the llama-bench binary at path with args and parses
// what it prints.
func runLlamaBench(ctx context.Context, path string, args []string) (*llamaBenchRun, error) {
	out, err := runTool(ctx, "--llama-bench "+path, path, args)
	if err != nil {
		return nil, err
	}
	run, err := parseLlamaBench(out)
	if err != nil {
		return nil, fmt.Errorf("--llama-bench %s: %w", path, err)
	}
	return run, nil
}

// runBatchedBench runs the llama-batched-bench binary at path with args and
// parses what it prints.
func runBatchedBench(ctx context.Context, path string, args []string) ([]llamaBenchRow, error) {
	out, err := runTool(ctx, path, path, args)
	if err != nil {
		return nil, err
	}
	rows, err := parseBatchedBench(out)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rows, nil
}

// runTool runs the binary at path with args and returns its standard
// output; an error starts with what, and ends with the last line the tool
// wrote to its standard error.
func runTool(ctx context.Context, what, path string, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: %w%s", what, err, lastLine(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// lastLine is ": " and the last non-empty line of s, or "" (what a failing
// llama-bench says last is usually why).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return ": " + l
	}
	return ""
}

// parseLlamaBench reads llama-bench's output: JSON (-o json), or its
// default markdown table.
func parseLlamaBench(out []byte) (*llamaBenchRun, error) {
	trimmed := bytes.TrimSpace(out)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return parseLlamaBenchJSON(trimmed)
	}
	return parseLlamaBenchMarkdown(out)
}

// llamaBenchTest is the part of a llama-bench JSON test object that
// llamabench reads.
type llamaBenchTest struct {
	BuildCommit string    `json:"build_commit"`
	NThreads    int       `json:"n_threads"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	NDepth      int       `json:"n_depth"`
	AvgTs       float64   `json:"avg_ts"`
	SamplesTs   []float64 `json:"samples_ts"`
}

func parseLlamaBenchJSON(data []byte) (*llamaBenchRun, error) {
	var tests []llamaBenchTest
	if err := json.Unmarshal(data, &tests); err != nil {
		return nil, fmt.Errorf("reading its JSON: %w", err)
	}
	if len(tests) == 0 {
		return nil, errors.New("it ran no test")
	}
	run := &llamaBenchRun{Build: tests[0].BuildCommit}
	for _, t := range tests {
		samples := t.SamplesTs
		if len(samples) == 0 {
			samples = []float64{t.AvgTs}
		}
		run.Rows = append(run.Rows, llamaBenchRow{Test: testName(t.NPrompt, t.NGen, t.NDepth), Threads: t.NThreads,
			TokensPerS: newStat(samples)})
	}
	return run, nil
}

// testName is llama-bench's name of a test.
func testName(prompt, gen, depth int) string {
	var s string
	switch {
	case gen == 0:
		s = fmt.Sprintf("pp%d", prompt)
	case prompt == 0:
		s = fmt.Sprintf("tg%d", gen)
	default:
		s = fmt.Sprintf("pp%d+tg%d", prompt, gen)
	}
	if depth > 0 {
		s += fmt.Sprintf(" @ d%d", depth)
	}
	return s
}

// parseLlamaBenchMarkdown reads llama-bench's markdown table: the columns
// test and t/s ("mean ± deviation"), threads where it has one, and the
// build from the footer.
func parseLlamaBenchMarkdown(out []byte) (*llamaBenchRun, error) {
	run := &llamaBenchRun{}
	col := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if b, ok := strings.CutPrefix(line, "build: "); ok {
			run.Build, _, _ = strings.Cut(b, " ")
			continue
		}
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case len(col) == 0:
			for i, c := range cells {
				col[c] = i
			}
			if _, ok := col["test"]; !ok {
				return nil, fmt.Errorf("its table has no test column: %q", line)
			}
			if _, ok := col["t/s"]; !ok {
				return nil, fmt.Errorf("its table has no t/s column: %q", line)
			}
		case strings.Trim(cells[0], "-:") == "":
			// the separator row
		default:
			if len(cells) <= max(col["test"], col["t/s"]) {
				return nil, fmt.Errorf("short row %q", line)
			}
			mean, _, _ := strings.Cut(cells[col["t/s"]], " ")
			tps, err := strconv.ParseFloat(mean, 64)
			if err != nil {
				return nil, fmt.Errorf("t/s of row %q: %w", line, err)
			}
			row := llamaBenchRow{Test: cells[col["test"]], TokensPerS: newStat([]float64{tps})}
			if i, ok := col["threads"]; ok && i < len(cells) {
				row.Threads, _ = strconv.Atoi(cells[i])
			}
			run.Rows = append(run.Rows, row)
		}
	}
	if len(run.Rows) == 0 {
		return nil, errors.New("it printed neither JSON nor a markdown table of results")
	}
	return run, nil
}

// batchedBenchName is the file name of llama.cpp's batched generation
// benchmark, which llamabench looks for beside llama-bench.
const batchedBenchName = "llama-batched-bench"

// findBatchedBench returns the llama-batched-bench binary in the directory
// of the llama-bench binary llamaBench (looked up in $PATH when it has no
// directory), or "" when there is none.
func findBatchedBench(llamaBench string) string {
	path := llamaBench
	if !strings.ContainsRune(path, filepath.Separator) {
		found, err := exec.LookPath(path)
		if err != nil {
			return ""
		}
		path = found
	}
	candidate := filepath.Join(filepath.Dir(path), batchedBenchName)
	if info, err := os.Stat(candidate); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
		return ""
	}
	return candidate
}

// batchedBenchArgs are the arguments of the llama-batched-bench run that
// measures what llamabench's batch rows measure: for each row count, every
// row's prompt of promptTokens tokens, then newTokens steps that each decode
// one token of every row, with the same threads in a KV cache of cells
// cells shared by as many sequences as the largest row count, as llamabench's
// batch context has. llama-batched-bench times each -npl value once (one
// repetition) and prints JSON lines.
func batchedBenchArgs(model string, threads, gpuLayers, cells int, rows []int, promptTokens, newTokens int) []string {
	npl := make([]string, len(rows))
	for i, r := range rows {
		npl[i] = strconv.Itoa(r)
	}
	ngl := gpuLayers
	if ngl < 0 {
		ngl = 99
	}
	return []string{"-m", model, "-t", strconv.Itoa(threads), "-ngl", strconv.Itoa(ngl), "-c", strconv.Itoa(cells),
		"-npp", strconv.Itoa(promptTokens), "-ntg", strconv.Itoa(newTokens), "-npl", strings.Join(npl, ","),
		"--output-format", "jsonl"}
}

// batchedTestName names a llama-batched-bench measurement as llamabench's
// batch row of the same shape is named, with the prompt as its depth.
func batchedTestName(rows, newTokens, promptTokens int) string {
	return fmt.Sprintf("batch %d x tg%d @ d%d", rows, newTokens, promptTokens)
}

// batchedBenchLine is the part of a llama-batched-bench JSON line that
// llamabench reads: S_TG, the generation speed of all rows together.
type batchedBenchLine struct {
	NThreads int     `json:"n_threads"`
	PP       int     `json:"pp"`
	TG       int     `json:"tg"`
	PL       int     `json:"pl"`
	SpeedTG  float64 `json:"speed_tg"`
}

// parseBatchedBench reads llama-batched-bench's JSON lines (its other output,
// logs and blank lines, is skipped) into one row per shape, whose samples
// are the speeds of its repetitions.
func parseBatchedBench(out []byte) ([]llamaBenchRow, error) {
	var rows []llamaBenchRow
	samples := map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var l batchedBenchLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("reading its JSON line %q: %w", line, err)
		}
		if l.PL <= 0 || l.TG <= 0 || l.SpeedTG <= 0 {
			return nil, fmt.Errorf("JSON line %q has no rows, generated tokens or generation speed", line)
		}
		name := batchedTestName(l.PL, l.TG, l.PP)
		if _, seen := samples[name]; !seen {
			rows = append(rows, llamaBenchRow{Test: name, Threads: l.NThreads})
		}
		samples[name] = append(samples[name], l.SpeedTG)
	}
	if len(rows) == 0 {
		return nil, errors.New("it printed no JSON line of results (--output-format jsonl)")
	}
	for i := range rows {
		rows[i].TokensPerS = newStat(samples[rows[i].Test])
	}
	return rows, nil
}
