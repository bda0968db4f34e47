package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	bin       string
	tinyModel string // untied output head
	tiedModel string // the embedding is the output head
	tinySpec  = testmodel.TinySpec(gguf.TensorF32)
	tiedSpec  = func() testmodel.Spec {
		s := testmodel.TinySpec(gguf.TensorF32)
		s.Tied, s.Name = true, "llamaloop-tiny-tied"
		return s
	}()
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llamabench-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if bin, err = clitest.Build(dir, "llamabench"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		tinyModel, tiedModel = filepath.Join(dir, "tiny.gguf"), filepath.Join(dir, "tied.gguf")
		for path, spec := range map[string]testmodel.Spec{tinyModel: tinySpec, tiedModel: tiedSpec} {
			if err := testmodel.WriteRandom(path, spec); err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// small are settings that keep a run on the tiny model around a second
// (with a fake llama-bench too: no pause after its runs).
var small = []string{"--threads", "1", "-r", "1", "--pp", "8,16", "--prompt", "4", "--tg", "3",
	"--batch", "1,2", "--beams", "2,3", "--sampler-iters", "5", "--bandwidth-mb", "8", "--settle", "0"}

func run(t *testing.T, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, bin, "", args...)
}

var measurementNames = []string{
	"pp8 raw decode", "pp16 raw decode", "pp8 generation", "pp16 generation",
	"tg3 raw decode", "tg3 greedy", "tg3 sampling chain", "tg3 Mirostat v2",
	"batch 1 x tg3", "batch 2 x tg3", "beam 2 x tg3", "beam 3 x tg3",
}

func TestTableJSONAndSVGChart(t *testing.T) {
	dir := t.TempDir()
	jsonPath, svgPath := filepath.Join(dir, "bench.json"), filepath.Join(dir, "bench.svg")
	res := run(t, append(small, "-m", tinyModel, "--json", jsonPath, "--chart", svgPath)...)
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Empty(t, res.Stderr, "no progress when stderr is not a terminal")

	// the table
	for _, s := range append([]string{"machine: ", "memory bandwidth: ", "model tiny.gguf: ", "ran on CPU (1 thread)",
		"bandwidth bound", "median t/s", "choosing a token", "greedy", "sampling chain", "Mirostat v2", "chart: " + svgPath,
		"llama.cpp: not compared; --llama-bench PATH runs llama.cpp's llama-bench"}, measurementNames...) {
		assert.Contains(t, res.Stdout, s)
	}
	assert.NotRegexp(t, `llama.cpp +ratio`, res.Stdout, "no comparison columns")

	// the JSON report
	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep report
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&rep))
	assert.Equal(t, "llamabench/1", rep.Schema)
	if cli.External {
		assert.Contains(t, rep.Version.LlamaCpp, "external")
	} else {
		assert.Contains(t, rep.Version.LlamaCpp, "ec98e2002")
		assert.Equal(t, "github.com/ollama/ollama v0.17.4", rep.Version.Module)
	}
	assert.NotEmpty(t, rep.Version.Llamaloop)
	assert.Equal(t, runtime.NumCPU(), rep.Machine.Cores)
	assert.NotEmpty(t, rep.Machine.CPU)
	assert.NotNil(t, rep.Machine.GPUs)
	assert.Greater(t, rep.Machine.Bandwidth, 1e8, "at least 100 MB/s")
	assert.Equal(t, 1, rep.Settings.Threads)
	assert.Equal(t, 1, rep.Settings.Repetitions)
	require.Len(t, rep.Models, 1)
	m := rep.Models[0]
	assert.Equal(t, "tiny.gguf", m.File)
	assert.Equal(t, uint64(tinySpec.Params()), m.Params)
	assert.Equal(t, tinySpec.Vocab.Size(), m.VocabSize)
	assert.Equal(t, 3, m.Layers)
	assert.Equal(t, "F32", m.Quantization)
	assert.Equal(t, "CPU", m.Device)
	assert.Equal(t, uint64(4*tinySpec.Params()), m.SizeBytes, "F32 weights")
	// an untied model reads every weight but the token embedding per token
	assert.Equal(t, m.SizeBytes-uint64(4*tinySpec.NEmbd*tinySpec.Vocab.Size()), m.BytesPerToken)
	assert.InDelta(t, rep.Machine.Bandwidth/float64(m.BytesPerToken), m.BoundTokensPerS, 1e-6*m.BoundTokensPerS)
	// the label names the size llama.cpp prints as ?B
	assert.Equal(t, "llama 2M all F32", m.Label)
	assert.Contains(t, res.Stdout, "model tiny.gguf: llama 2M all F32, ")
	// a model whose weights fit in the last-level cache has its bound
	// fractions marked and a footnote
	llc := rep.Machine.LastLevelCache
	assert.Equal(t, lastLevelCache(cpuCacheDir), llc)
	assert.Equal(t, llc.Bytes > 0 && m.BytesPerToken <= llc.Bytes, m.CacheResident)
	if m.CacheResident {
		assert.Regexp(t, `tg3 greedy +[0-9.]+ +[0-9.]+ +[0-9]+%\*`, res.Stdout)
		assert.Contains(t, res.Stdout, fmt.Sprintf("\n* the %s of weights read per token fit in the %s L%d cache: ",
			formatBytes(float64(m.BytesPerToken)), formatBytes(float64(llc.Bytes)), llc.Level))
	} else {
		assert.NotContains(t, res.Stdout, "%*")
	}
	// a binary built for this CPU (make's flags: -march=native) uses all of
	// its features; one built for fewer says which it leaves
	if strings.Contains(os.Getenv("CGO_CFLAGS"), "-march=native") {
		assert.Equal(t, []string{}, rep.Machine.Build.Unused)
	}
	if len(rep.Machine.Build.Unused) > 0 {
		assert.Contains(t, res.Stdout, "\nportable build: llama.cpp was compiled for a baseline CPU and does not use this CPU's "+
			strings.Join(rep.Machine.Build.Unused, ", "))
	} else {
		assert.NotContains(t, res.Stdout, "portable build")
	}

	var names []string
	for _, r := range m.Results {
		names = append(names, r.Name)
		require.Len(t, r.TokensPerS.Samples, 1, r.Name)
		assert.Greater(t, r.TokensPerS.Median, 0.0, r.Name)
		assert.Equal(t, r.TokensPerS.Samples[0], r.TokensPerS.Median, r.Name)
		assert.Equal(t, r.TokensPerS.Min, r.TokensPerS.Median, r.Name)
		switch r.Group {
		case groupPrompt:
			assert.Zero(t, r.NewTokens)
		case groupGeneration:
			assert.Equal(t, 4, r.PromptTokens)
			assert.Equal(t, 3, r.NewTokens)
			require.NotNil(t, r.BoundFraction, r.Name)
			assert.InDelta(t, r.TokensPerS.Median/m.BoundTokensPerS, *r.BoundFraction, 1e-9)
		case groupBatch:
			require.NotNil(t, r.PerRowTokensPerS)
			assert.InDelta(t, r.TokensPerS.Median/float64(r.Rows), r.PerRowTokensPerS.Median, 1e-9)
			assert.Nil(t, r.BoundFraction)
		case groupBeam:
			require.NotNil(t, r.DecodedTokensPerS)
			// every step decodes one token per beam
			assert.Greater(t, r.DecodedTokensPerS.Median, r.TokensPerS.Median)
		default:
			t.Errorf("%s: unknown group %q", r.Name, r.Group)
		}
	}
	assert.Equal(t, measurementNames, names)
	require.Len(t, m.Sampler, 3)
	for i, s := range m.Sampler {
		assert.Equal(t, []string{"greedy", "sampling chain", "Mirostat v2"}[i], s.Name)
		assert.Equal(t, tinySpec.Vocab.Size(), s.VocabSize)
		assert.Greater(t, s.Llamaloop.Median, 0.0)
		assert.Greater(t, s.LlamaCpp.Median, 0.0)
	}

	// the chart: one series per measurement group, one point per setting
	svg, err := os.ReadFile(svgPath)
	require.NoError(t, err)
	series := svgSeries(t, svg)
	assert.Equal(t, map[string]map[string]int{
		"batch": {"tiny total": 2, "tiny per row": 2},
		"beam":  {"tiny output": 2, "tiny decoded": 2},
	}, series)
}

// svgSeries parses an SVG chart and counts the points of each series, by
// panel.
func svgSeries(t *testing.T, data []byte) map[string]map[string]int {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(data))
	out := map[string]map[string]int{}
	var panelID, seriesName string
	sawRoot := false
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		require.NoError(t, err, "the chart is well-formed XML")
		switch el := tok.(type) {
		case xml.StartElement:
			attr := map[string]string{}
			for _, a := range el.Attr {
				attr[a.Name.Local] = a.Value
			}
			switch {
			case el.Name.Local == "svg":
				assert.Equal(t, "http://www.w3.org/2000/svg", el.Name.Space)
				sawRoot = true
			case el.Name.Local == "g" && attr["class"] == "panel":
				panelID = attr["data-panel"]
				out[panelID] = map[string]int{}
			case el.Name.Local == "g" && attr["class"] == "series":
				seriesName = attr["data-series"]
				out[panelID][seriesName] += 0
			case el.Name.Local == "circle" && seriesName != "":
				out[panelID][seriesName]++
			}
		case xml.EndElement:
			if el.Name.Local == "g" && seriesName != "" {
				seriesName = ""
			}
		}
	}
	require.True(t, sawRoot, "the root element is svg")
	return out
}

func TestJSONToStdoutAndTwoModelsAndPNG(t *testing.T) {
	pngPath := filepath.Join(t.TempDir(), "bench.png")
	args := []string{"--threads", "1", "-r", "2", "--pp", "8", "--prompt", "4", "--tg", "2", "--batch", "1,2,4", "--beams", "2",
		"--sampler-iters", "3", "--bandwidth-mb", "0", "-m", tinyModel, "-m", tiedModel, "--json", "-", "--chart", pngPath}
	res := run(t, args...)
	require.Equal(t, 0, res.Code, res.Stderr)
	var rep report
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &rep), "stdout holds only the JSON")
	assert.Contains(t, res.Stderr, "median t/s", "the table moves to stderr")
	require.Len(t, rep.Models, 2)
	assert.Zero(t, rep.Machine.Bandwidth, "--bandwidth-mb 0 skips the measurement")
	for _, m := range rep.Models {
		assert.Zero(t, m.BoundTokensPerS)
		for _, r := range m.Results {
			assert.Len(t, r.TokensPerS.Samples, 2)
			assert.LessOrEqual(t, r.TokensPerS.Min, r.TokensPerS.Median)
			assert.LessOrEqual(t, r.TokensPerS.Median, r.TokensPerS.Max)
			assert.Nil(t, r.BoundFraction, "no bound without a bandwidth")
		}
	}
	tied := rep.Models[1]
	assert.Equal(t, uint64(tiedSpec.Params()), tied.Params)
	assert.Equal(t, tied.SizeBytes, tied.BytesPerToken, "the tied embedding is read as the output head")

	f, err := os.Open(pngPath)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	w, h := buildChart(&rep).size()
	assert.Equal(t, w, img.Bounds().Dx())
	assert.Equal(t, h, img.Bounds().Dy())
	// each of the four series of a panel is drawn in its colour
	counts := map[string]int{}
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			counts[fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, b>>8)]++
		}
	}
	for _, c := range palette[:4] {
		assert.Greater(t, counts[c], 50, "colour %s", c)
	}
}

func TestChartSVGAndPNGFromData(t *testing.T) {
	nan := math.NaN()
	c := chart{Title: "t <&> t", Panels: []panel{
		{ID: "batch", Title: "B", XLabel: "rows", YLabel: "tokens/s", X: []int{1, 2, 4},
			Series: []series{{"a", []float64{10, 20, 30}}, {"b & c", []float64{5, nan, 7}}}},
		{ID: "beam", Title: "C", XLabel: "beams", YLabel: "tokens/s", X: []int{2},
			Series: []series{{"d", []float64{nan}}}},
	}}
	assert.Equal(t, map[string]map[string]int{
		"batch": {"a": 3, "b & c": 2},
		"beam":  {"d": 0},
	}, svgSeries(t, renderSVG(c)))
	data, err := renderPNG(c)
	require.NoError(t, err)
	img, err := png.Decode(bytes.NewReader(data))
	require.NoError(t, err)
	assert.Equal(t, 960, img.Bounds().Dx())
	assert.Equal(t, 1.0, niceCeil(0))
	assert.Equal(t, 50.0, niceCeil(42))
	assert.Equal(t, 250.0, niceCeil(201))
	assert.Equal(t, 1000.0, niceCeil(999))
}

func TestParseLlamaBenchJSON(t *testing.T) {
	data, err := os.ReadFile("testdata/llama-bench.json")
	require.NoError(t, err)
	run, err := parseLlamaBench(data)
	require.NoError(t, err)
	assert.Equal(t, "ec98e2002", run.Build)
	assert.Equal(t, []llamaBenchRow{
		{Test: "pp128", Threads: 2, TokensPerS: withMean(stat{Samples: []float64{2500, 2374.77, 2461.54}, Min: 2374.77, Median: 2461.54, Max: 2500})},
		{Test: "pp512", Threads: 2, TokensPerS: withMean(stat{Samples: []float64{1673.2, 1662.3}, Min: 1662.3, Median: 1667.75, Max: 1673.2})},
		{Test: "tg32", Threads: 2, TokensPerS: withMean(stat{Samples: []float64{395.06, 385.54, 390.24}, Min: 385.54, Median: 390.24, Max: 395.06})},
	}, run.Rows)
	row, ok := run.find("tg32", 2)
	assert.True(t, ok)
	assert.Equal(t, 390.24, row.TokensPerS.Median)
	_, ok = run.find("tg32", 1)
	assert.False(t, ok, "another thread count")
	_, ok = run.find("tg128", 2)
	assert.False(t, ok)
}

func TestParseLlamaBenchMarkdown(t *testing.T) {
	data, err := os.ReadFile("testdata/llama-bench.md")
	require.NoError(t, err)
	run, err := parseLlamaBench(data)
	require.NoError(t, err)
	assert.Equal(t, "ec98e2002", run.Build)
	assert.Equal(t, []llamaBenchRow{
		{Test: "pp128", Threads: 1, TokensPerS: newStat([]float64{701.32})},
		{Test: "tg32", Threads: 1, TokensPerS: newStat([]float64{140.05})},
		{Test: "tg32 @ d512", Threads: 1, TokensPerS: newStat([]float64{121.5})},
	}, run.Rows)
	assert.Equal(t, "tg32 @ d512", testName(0, 32, 512))
	assert.Equal(t, "pp512+tg128", testName(512, 128, 0))
}

func TestParseLlamaBenchErrors(t *testing.T) {
	for name, out := range map[string]string{
		"nothing":      "",
		"no tests":     "[]",
		"broken JSON":  `[{"n_prompt": 8,`,
		"no t/s":       "| model | test |\n| --- | --- |\n| x | pp8 |\n",
		"bad t/s":      "| test | t/s |\n| --- | --- |\n| pp8 | fast |\n",
		"a log only":   "main: loading model\nerror: failed to load model\n",
		"no test name": "| model | t/s |\n| --- | --- |\n| x | 1 ± 0 |\n",
	} {
		_, err := parseLlamaBench([]byte(out))
		assert.Error(t, err, name)
	}
}

// fakeLlamaBench writes a script that records its arguments in args and
// prints out (or fails with a message when out is "").
func fakeLlamaBench(t *testing.T, out string) (script, args string) {
	t.Helper()
	return fakeTool(t, t.TempDir(), "llama-bench", out)
}

// nextRun separates the outputs of a fake tool's successive runs.
const nextRun = "\n<next run>\n"

// fakeTool writes the script dir/name that records its arguments in
// dir/name.args and prints out (or fails with a message when out is ""):
// when out holds several outputs separated by nextRun, run k prints the
// k-th, round and round.
func fakeTool(t *testing.T, dir, name, out string) (script, args string) {
	t.Helper()
	script, args = filepath.Join(dir, name), filepath.Join(dir, name+".args")
	body := "#!/bin/sh\necho \"$@\" >> " + args + "\n"
	if out == "" {
		body += "echo 'main: loading' >&2\necho 'error: failed to load model' >&2\nexit 1\n"
	} else {
		outs := strings.Split(out, nextRun)
		for k, o := range outs {
			require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.out%d", name, k)), []byte(o), 0o644))
		}
		count := filepath.Join(dir, name+".count")
		body += fmt.Sprintf("n=$(cat %s 2>/dev/null || echo 0)\necho $((n + 1)) > %s\ncat %s.out$((n %% %d))\n",
			count, count, filepath.Join(dir, name), len(outs))
	}
	require.NoError(t, os.WriteFile(script, []byte(body), 0o755))
	return script, args
}

func TestLlamaBenchComparison(t *testing.T) {
	// llama-bench's JSON for the tests of the small settings, one thread: the
	// prompt lengths' run, then generation's (with a row at depth 0 that
	// must not be taken for generation after the prompt)
	out := `[
  {"build_commit": "abc1234", "n_threads": 1, "n_prompt": 8, "n_gen": 0, "n_depth": 0, "avg_ts": 1000, "samples_ts": [ 1000 ]},
  {"build_commit": "abc1234", "n_threads": 1, "n_prompt": 16, "n_gen": 0, "n_depth": 0, "avg_ts": 2000, "samples_ts": [ 2000 ]}
]` + nextRun + `[
  {"build_commit": "abc1234", "n_threads": 1, "n_prompt": 0, "n_gen": 3, "n_depth": 0, "avg_ts": 900, "samples_ts": [ 900 ]},
  {"build_commit": "abc1234", "n_threads": 1, "n_prompt": 0, "n_gen": 3, "n_depth": 4, "avg_ts": 500, "samples_ts": [ 400, 600 ]}
]`
	script, argsFile := fakeLlamaBench(t, out)
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	// the warm-up after each of the two runs (the flag given last wins)
	start := time.Now()
	res := run(t, append(small, "-m", tinyModel, "--beams", "", "--llama-bench", script, "--json", jsonPath, "--settle", "600ms")...)
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.GreaterOrEqual(t, time.Since(start), 1200*time.Millisecond)
	args, err := os.ReadFile(argsFile)
	require.NoError(t, err)
	// Generation after the --prompt tokens, as llamabench's tg rows: llama-bench's depth.
	assert.Equal(t, "-p 8,16 -n 0 -m "+tinyModel+" -t 1 -r 4 -ngl 99 -fa 1 -o json\n"+
		"-p 0 -n 3 -d 4 -m "+tinyModel+" -t 1 -r 4 -ngl 99 -fa 1 -o json\n", string(args))

	assert.Regexp(t, `measurement +median t/s +min t/s +of bound +llama.cpp +ratio  note`, res.Stdout)
	assert.Regexp(t, `pp8 raw decode +[0-9.]+ +[0-9.]+ +1000.0 +[0-9]+\.[0-9]{2} *\n`, res.Stdout)
	assert.Regexp(t, `tg3 raw decode +[0-9.]+ +[0-9.]+ +[0-9]+%\*? +600.0 +[0-9]+\.[0-9]{2} *\n`, res.Stdout)
	assert.Contains(t, res.Stdout, "llama.cpp: "+script+" (build abc1234), same model, 1 thread, 1 run of 4 repetitions, the last of each just before one of llamaloop's; ratio = median of llamaloop / llama.cpp over those pairs\n")
	assert.Contains(t, res.Stdout, "batch rows: not compared; no llama-batched-bench beside "+script+"\n")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(data, &rep))
	assert.Equal(t, script, rep.Settings.LlamaBench)
	require.Len(t, rep.Models, 1)
	assert.Equal(t, "abc1234", rep.Models[0].LlamaBenchBuild)
	// tg3 at depth 4 gives two samples a run: the last, taken after the
	// process's slow start, pairs with the repetition
	want := map[string][]float64{"pp8 raw decode": {1000}, "pp16 raw decode": {2000}, "tg3 raw decode": {600}}
	assertRatios(t, rep.Models[0].Results, want)
	for _, r := range rep.Models[0].Results {
		if r.Name == "tg3 raw decode" {
			assert.InDelta(t, r.TokensPerS.Median/600, *r.Ratio, 1e-12)
		}
	}
}

// assertRatios asserts that exactly the rows named in want carry llama.cpp's
// samples, want's, and a ratio that is the median of the ratios of their
// own samples to those, one by one, when the two pair.
func assertRatios(t *testing.T, results []result, want map[string][]float64) {
	t.Helper()
	for _, r := range results {
		upstream, ok := want[r.Name]
		if !ok {
			assert.Nil(t, r.LlamaCpp, r.Name)
			assert.Nil(t, r.Ratio, r.Name)
			continue
		}
		require.NotNil(t, r.LlamaCpp, r.Name)
		require.NotNil(t, r.Ratio, r.Name)
		assert.Equal(t, upstream, r.LlamaCpp.Samples, r.Name)
		if ours := r.TokensPerS.Samples; len(ours) == len(upstream) && len(ours)%2 == 1 {
			ratios := make([]float64, len(ours))
			for i := range ours {
				ratios[i] = ours[i] / upstream[i]
			}
			sort.Float64s(ratios)
			assert.InDelta(t, ratios[len(ratios)/2], *r.Ratio, 1e-12, r.Name)
		}
		delete(want, r.Name)
	}
	assert.Empty(t, want, "rows without a ratio")
}

func TestPairedRatio(t *testing.T) {
	// pairs 1, 0.5 and 3: their median, not 20 / 10
	assert.Equal(t, 1.0, pairedRatio([]float64{10, 20, 30}, []float64{10, 40, 10}))
	assert.Equal(t, 0.75, pairedRatio([]float64{10, 20, 30, 40}, []float64{10, 40, 10, 80}))
	// samples that do not pair: the ratio of the medians
	assert.Equal(t, 2.0, pairedRatio([]float64{10, 20, 30}, []float64{5, 15}))
}

func TestParseBatchedBench(t *testing.T) {
	data, err := os.ReadFile("testdata/llama-batched-bench.jsonl")
	require.NoError(t, err)
	rows, err := parseBatchedBench(data)
	require.NoError(t, err)
	assert.Equal(t, []llamaBenchRow{
		{Test: "batch 1 x tg32 @ d32", Threads: 2, TokensPerS: newStat([]float64{274.308441, 269.156372})},
		{Test: "batch 8 x tg32 @ d32", Threads: 2, TokensPerS: newStat([]float64{394.024384, 387.083527, 390.5})},
	}, rows)
	assert.Equal(t, 390.5, rows[1].TokensPerS.Median)

	for name, out := range map[string]string{
		"nothing":       "",
		"markdown only": "|    PP |     TG |    B |\n|-------|--------|------|\n|    32 |     32 |    1 |\n",
		"broken JSON":   `{"pp": 32, "tg": 32,`,
		"no speed":      `{"n_threads": 2, "pp": 32, "tg": 32, "pl": 1}`,
	} {
		_, err := parseBatchedBench([]byte(out))
		assert.Error(t, err, name)
	}
}

// batchedLine is what llama-batched-bench prints of one row count.
func batchedLine(rows int, speedTG float64) string {
	return fmt.Sprintf(`{"n_kv_max": 512, "n_batch": 2048, "n_ubatch": 512, "flash_attn": -1, "is_pp_shared": 0, "n_gpu_layers": 99, `+
		`"n_threads": 1, "n_threads_batch": 1, "pp": 4, "tg": 3, "pl": %d, "n_kv": %d, "t_pp": 0.01, "speed_pp": 400, "t_tg": 0.01, `+
		`"speed_tg": %g, "t": 0.02, "speed": 350}`, rows, 7*rows, speedTG)
}

// Each repetition of the compared rows follows one run of the tool, and each
// ratio pairs a repetition with the run just before it.
func TestBatchedBenchComparison(t *testing.T) {
	dir := t.TempDir()
	// three runs for the prompt's repetitions, then three for generation's
	pp := `[{"build_commit": "abc1234", "n_threads": 1, "n_prompt": 8, "n_gen": 0, "n_depth": 0, "avg_ts": %[1]g, "samples_ts": [ %[1]g ]}]`
	tg := `[{"build_commit": "abc1234", "n_threads": 1, "n_prompt": 0, "n_gen": 3, "n_depth": 4, "avg_ts": %[1]g, "samples_ts": [ %[1]g ]}]`
	script, benchArgsFile := fakeTool(t, dir, "llama-bench", strings.Join([]string{
		fmt.Sprintf(pp, 1000.0), fmt.Sprintf(pp, 4000.0), fmt.Sprintf(pp, 250.0),
		fmt.Sprintf(tg, 500.0), fmt.Sprintf(tg, 125.0), fmt.Sprintf(tg, 2000.0)}, nextRun))
	// what llama-batched-bench prints for -npl 1,2: a line a row count, then
	// its performance summary
	var runs []string
	for _, speeds := range [][2]float64{{300, 600}, {100, 2400}, {1200, 150}} {
		runs = append(runs, batchedLine(1, speeds[0])+"\n"+batchedLine(2, speeds[1])+"\n\nllama_perf_context_print: total time\n")
	}
	batched, argsFile := fakeTool(t, dir, "llama-batched-bench", strings.Join(runs, nextRun))
	jsonPath := filepath.Join(t.TempDir(), "bench.json")
	res := run(t, append(small, "-m", tinyModel, "--pp", "8", "-r", "3", "--beams", "", "--llama-bench", script, "--json", jsonPath)...)
	require.Equal(t, 0, res.Code, res.Stderr)
	// a run of one repetition before each repetition
	args, err := os.ReadFile(benchArgsFile)
	require.NoError(t, err)
	common := " -m " + tinyModel + " -t 1 -r 4 -ngl 99 -fa 1 -o json\n"
	assert.Equal(t, strings.Repeat("-p 8 -n 0"+common, 3)+strings.Repeat("-p 0 -n 3 -d 4"+common, 3), string(args))
	args, err = os.ReadFile(argsFile)
	require.NoError(t, err)
	// the batch context's cells: 2 sequences of 4 + 3 + 1 tokens, 256 each
	assert.Equal(t, strings.Repeat("-m "+tinyModel+" -t 1 -ngl 99 -c 512 -npp 4 -ntg 3 -npl 1,2 --output-format jsonl\n", 3), string(args))
	assert.Regexp(t, `batch 1 x tg3 +[0-9.]+ +[0-9.]+ +300.0 +[0-9]+\.[0-9]{2}  [0-9.]+ t/s per row\n`, res.Stdout)
	assert.Regexp(t, `batch 2 x tg3 +[0-9.]+ +[0-9.]+ +600.0 +[0-9]+\.[0-9]{2}  [0-9.]+ t/s per row\n`, res.Stdout)
	assert.Contains(t, res.Stdout, "batch rows: against "+batched+", its generation speed (S_TG) after the same prompts, in a KV cache of the same size\n")

	data, err := os.ReadFile(jsonPath)
	require.NoError(t, err)
	var rep report
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Models, 1)
	assert.Equal(t, batched, rep.Models[0].LlamaBatchedBench)
	want := map[string][]float64{"pp8 raw decode": {1000, 4000, 250}, "tg3 raw decode": {500, 125, 2000},
		"batch 1 x tg3": {300, 100, 1200}, "batch 2 x tg3": {600, 2400, 150}}
	assertRatios(t, rep.Models[0].Results, want)

	// a failing llama-batched-bench fails the run, saying which and why
	fakeTool(t, dir, "llama-batched-bench", "")
	res = run(t, append(small, "-m", tinyModel, "--llama-bench", script)...)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "llamabench: "+batched+": exit status 1: error: failed to load model")
}

func TestFindBatchedBench(t *testing.T) {
	dir := t.TempDir()
	bench, _ := fakeTool(t, dir, "llama-bench", "[]")
	assert.Empty(t, findBatchedBench(bench), "none beside it")
	batched := filepath.Join(dir, "llama-batched-bench")
	require.NoError(t, os.WriteFile(batched, []byte("#!/bin/sh\n"), 0o644))
	assert.Empty(t, findBatchedBench(bench), "not executable")
	require.NoError(t, os.Chmod(batched, 0o755))
	assert.Equal(t, batched, findBatchedBench(bench))
	t.Setenv("PATH", dir)
	assert.Equal(t, batched, findBatchedBench("llama-bench"), "llama-bench found in $PATH")
	assert.Empty(t, findBatchedBench("no-such-llama-bench"))
}

func TestLlamaBenchFailure(t *testing.T) {
	script, _ := fakeLlamaBench(t, "")
	res := run(t, append(small, "-m", tinyModel, "--llama-bench", script)...)
	assert.Equal(t, 1, res.Code)
	lines := strings.Split(strings.TrimRight(res.Stderr, "\n"), "\n")
	require.Len(t, lines, 1, res.Stderr)
	assert.Contains(t, lines[0], "llamabench: --llama-bench "+script+": exit status 1: error: failed to load model")

	missing := filepath.Join(t.TempDir(), "llama-bench")
	res = run(t, append(small, "-m", tinyModel, "--llama-bench", missing)...)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "--llama-bench "+missing)
}

func TestErrors(t *testing.T) {
	empty := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing model", []string{"-m", filepath.Join(empty, "x.gguf")}, 1, "does not exist"},
		{"no benchmark model", []string{"--models", empty}, 1, "make bench-models"},
		{"unknown option", []string{"--fast"}, 2, "unknown option --fast"},
		{"bad list", []string{"--batch", "1,x"}, 2, "--batch \"1,x\": not a comma-separated list of positive integers"},
		{"bad repetitions", []string{"-r", "0"}, 2, "-r 0"},
		{"bad chart", []string{"--chart", "out.txt"}, 2, ".svg or .png"},
		{"stray argument", []string{"model.gguf"}, 2, "unexpected argument"},
		// every numeric option out of its range, refused before anything is allocated
		{"no prompt length", []string{"-m", tinyModel, "--pp", ""}, 2, "--pp: give at least one prompt length"},
		{"zero prompt length", []string{"-m", tinyModel, "--pp", "0"}, 2, `--pp "0": not a comma-separated list of positive integers`},
		{"huge prompt length", []string{"-m", tinyModel, "--pp", "99999999"}, 2, "--pp 99999999: a prompt length must be from 1 to 16776960 tokens"},
		{"huge copy", []string{"-m", tinyModel, "--bandwidth-mb", "2000000"}, 2, "--bandwidth-mb 2000000: must be from 0 (no measurement) to 1048576"},
		{"negative copy", []string{"-m", tinyModel, "--bandwidth-mb", "-1"}, 2, "--bandwidth-mb -1: must be from 0"},
		{"copy overflowing an int", []string{"-m", tinyModel, "--bandwidth-mb", "99999999999999"}, 2, "--bandwidth-mb 99999999999999: must be from 0"},
		{"too many repetitions", []string{"-m", tinyModel, "-r", "100000"}, 2, "-r 100000: must be from 1 to 10000"},
		{"float repetitions", []string{"-m", tinyModel, "-r", "1e9"}, 2, `-r "1e9": not an integer`},
		{"no new tokens", []string{"-m", tinyModel, "--tg", "0"}, 2, "--tg 0: must be from 1 to 16776960 tokens"},
		{"huge prompt", []string{"-m", tinyModel, "--prompt", "16777216"}, 2, "--prompt 16777216: must be from 1 to 16776960 tokens"},
		{"prompt and tg too long", []string{"-m", tinyModel, "--prompt", "10000000", "--tg", "10000000"}, 2, "--prompt 10000000 and --tg 10000000: together at most 16776960 tokens"},
		{"one beam", []string{"-m", tinyModel, "--beams", "1,2"}, 2, "--beams 1: beam search takes from 2 to 256 beams"},
		{"too many beams", []string{"-m", tinyModel, "--beams", "1000"}, 2, "--beams 1000: beam search takes from 2 to 256 beams"},
		{"too many rows", []string{"-m", tinyModel, "--batch", "300"}, 2, "--batch 300: llama.cpp decodes at most 256 rows together"},
		{"too many threads", []string{"-m", tinyModel, "--threads", "513"}, 2, "--threads 513: must be from 1 to 512"},
		{"no threads", []string{"-m", tinyModel, "--threads", "0"}, 2, "--threads 0: must be from 1 to 512"},
		{"no sampler iterations", []string{"-m", tinyModel, "--sampler-iters", "0"}, 2, "--sampler-iters 0: must be from 1 to 16777216"},
		{"bad gpu layers", []string{"-m", tinyModel, "--gpu-layers", "-5"}, 2, "--gpu-layers -5: must be -1 (all) or from 0 up"},
		{"negative settle", []string{"-m", tinyModel, "--settle", "-1s"}, 2, "--settle -1s: must be from 0 to 1m"},
		{"long settle", []string{"-m", tinyModel, "--settle", "2m"}, 2, "--settle 2m0s: must be from 0 to 1m"},
		{"text threads", []string{"-m", tinyModel, "--threads", "all"}, 2, `--threads "all": not a comma-separated list of integers and ranges`},
		{"bad quiet", []string{"-m", tinyModel, "--quiet=sometimes"}, 2, `--quiet "sometimes": not true or false`},
		{"directory model", []string{"-m", empty}, 2, "-m " + empty + ": a directory, not a GGUF file"},
		{"device model", []string{"-m", "/dev/zero"}, 2, "-m /dev/zero: not a regular file (a character device)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, c.args...)
			assert.Equal(t, c.code, res.Code, res.Stderr)
			assert.Empty(t, res.Stdout)
			lines := strings.Split(strings.TrimRight(res.Stderr, "\n"), "\n")
			require.Len(t, lines, 1, res.Stderr)
			assert.True(t, strings.HasPrefix(lines[0], "llamabench: "), lines[0])
			assert.Contains(t, lines[0], c.msg)
		})
	}
}

// Sizes that cannot fit in the memory left are refused before they are
// allocated, naming the option: the bandwidth copy (--bandwidth-mb 100000
// died of out-of-memory) and the contexts of --pp (llama.cpp committed the
// cache before failing).
func TestSizesBoundedByMemory(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--bandwidth-mb", "100000"}, "--bandwidth-mb 100000: the copy needs two buffers of 100000 MB, more than half of the "},
		{[]string{"--bandwidth-mb", "0", "--pp", "16000000"}, "--pp 16000000: the context needs "},
	} {
		res := clitest.RunWithMemoryLimit(t, bin, 3<<20, append([]string{"--threads", "1", "-m", tinyModel, "-r", "1"}, c.args...)...)
		assert.Equal(t, 2, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, c.msg)
		assert.Contains(t, res.Stderr, "of memory available now")
	}
}

// Output that cannot be written is a failure, not a success (/dev/full).
func TestLostOutputFails(t *testing.T) {
	res := clitest.RunToDevFull(t, bin, append([]string{"-m", tinyModel}, small...)...)
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "llamabench: writing the output: write /dev/stdout: no space left on device")
}

func TestProgressOnlyOnATerminal(t *testing.T) {
	stdout, term, code := clitest.RunWithTerminalStderr(t, bin, append(small, "-m", tinyModel, "--beams", "", "--batch", "")...)
	require.Equal(t, 0, code, term)
	assert.Contains(t, term, "loading tiny.gguf [")
	assert.Contains(t, term, "tiny.gguf: measuring pp8 raw decode")
	assert.NotContains(t, stdout, "measuring")
	assert.NotContains(t, stdout, "loading")
	assert.Contains(t, stdout, "tg3 greedy")
}

func TestInterrupt(t *testing.T) {
	cmd := exec.Command(bin, "--threads", "1", "-m", tinyModel, "-r", "50", "--pp", "8", "--tg", "500", "--bandwidth-mb", "0")
	var stdout, stderr clitest.LockedBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())
	// Bounded by the test's own deadline only: a loaded machine makes the
	// wait longer, not the test failed.
	for !strings.Contains(stdout.String(), "pp8 generation") {
		if d, ok := t.Deadline(); ok && time.Until(d) < 5*time.Second {
			cmd.Process.Kill()
			t.Fatalf("no measurement by the test's deadline: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err := cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 130, exit.ExitCode())
	assert.Equal(t, "llamabench: interrupted\n", stderr.String())
}

// --replay measures every ratio on replay backends that wait as the profile
// says: the raw loops can be no faster than the profile's device, and
// every ratio of the issue has a row, beside the device's where the profile
// gives one.
func TestReplay(t *testing.T) {
	dir := t.TempDir()
	prof := filepath.Join(dir, "profile.json")
	require.NoError(t, os.WriteFile(prof, []byte(`{"name": "test device", "models": [{"name": "m", "vocab_size": 500,
		"steps": [{"rows": 1, "ms": 2}, {"rows": 4, "ms": 2.5}], "prompt_tokens_per_s": 100000,
		"ratios": {"greedy / raw": 1.01}}]}`), 0o644))
	out := filepath.Join(dir, "out.json")
	res := run(t, "--replay", prof, "-r", "3", "--tg", "4", "--prompt", "4", "--pp", "16", "--beams", "2", "--json", out)
	require.Equal(t, 0, res.Code, res.Stderr)
	names := []string{"greedy / raw", "sampling chain / raw", "Mirostat v2 / raw",
		"beam 2 decoded / batch 2 greedy", "pp16 generation / raw decode"}
	for _, n := range names {
		assert.Contains(t, res.Stdout, n)
	}
	assert.Regexp(t, `greedy / raw +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +1\.01\n`, res.Stdout)

	var rep struct {
		Models []struct {
			Name     string
			Speeds   map[string]stat `json:"tokens_per_s"`
			Ratios   map[string]stat
			Spinning map[string]stat `json:"spinning_ratios"`
		}
	}
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &rep))
	require.Len(t, rep.Models, 1)
	m := rep.Models[0]
	assert.Equal(t, "m", m.Name)
	for _, n := range names {
		for _, ratios := range []map[string]stat{m.Ratios, m.Spinning} {
			r, ok := ratios[n]
			require.True(t, ok, n)
			assert.Len(t, r.Samples, 3, n)
			assert.Greater(t, r.Median, 0.0, n)
		}
	}
	// 2 ms a step: at most 500 tokens/s; 16 prompt tokens at 100000 t/s.
	// The lower bound only catches a wait of the wrong unit: a loaded 2-core
	// machine made the steps 10 ms long (96 tokens/s) once.
	for _, raw := range []stat{m.Speeds["tg4 raw decode"], m.Speeds["tg4 raw decode (spinning)"]} {
		assert.LessOrEqual(t, raw.Max, 500.0)
		assert.Greater(t, raw.Median, 25.0)
	}
	assert.LessOrEqual(t, m.Speeds["pp16 raw decode"].Max, 100000.0)

	res = run(t, "--replay", filepath.Join(dir, "missing.json"))
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "missing.json")
}

// Ctrl-C ends llamabench while it waits for a FIFO's writer (--replay
// <(...) is one), with the usual status.
func TestCtrlCWhileReadingAFIFO(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "profile.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	code, stderr := clitest.InterruptWhileReading(t, fifo, bin, "--threads", "1", "--replay", fifo)
	assert.Equal(t, 130, code)
	assert.Equal(t, "llamabench: interrupted\n", stderr)
}

// lbCommit and lbNumber are the build fields of llama-bench-style output
// for this engine: the pinned commit, or "unknown" and 0 for an external
// llama.cpp, whose installed headers do not carry its build.
var lbCommit, lbNumber = func() (string, string) {
	if cli.External {
		return "unknown", "0"
	}
	return "ec98e2002", "7416"
}()
