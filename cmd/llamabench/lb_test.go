package main

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upstreamFields reads the field names of upstream llama-bench's CSV
// header in testdata (see testdata/README.md for where it comes from).
func upstreamFields(t *testing.T) []string {
	t.Helper()
	f, err := os.Open("testdata/upstream-llama-bench.csv")
	require.NoError(t, err)
	defer f.Close()
	header, err := csv.NewReader(f).Read()
	require.NoError(t, err)
	return header
}

// upstreamJSON reads upstream llama-bench's JSON tests in testdata.
func upstreamJSON(t *testing.T) []map[string]any {
	t.Helper()
	data, err := os.ReadFile("testdata/upstream-llama-bench.json")
	require.NoError(t, err)
	var tests []map[string]any
	require.NoError(t, json.Unmarshal(data, &tests))
	require.NotEmpty(t, tests)
	return tests
}

// ownFields are llamabench's columns after llama-bench's.
var ownFields = []string{"llamaloop", "portable_build", "median_ts", "min_ts"}

// The done criterion of issue 37: llamabench -p 64 -n 16 -r 2 -o csv prints
// llama-bench's columns (the header of upstream's own CSV, then
// llamabench's), one row per test, with values that hold together.
func TestLlamaBenchStyleCSV(t *testing.T) {
	res := run(t, "-m", tinyModel, "-p", "64", "-n", "16", "-r", "2", "-t", "1", "-o", "csv")
	require.Equal(t, 0, res.Code, res.Stderr)
	records, err := csv.NewReader(strings.NewReader(res.Stdout)).ReadAll()
	require.NoError(t, err, res.Stdout)
	require.Len(t, records, 3, "a header and two tests")
	assert.Equal(t, append(upstreamFields(t), ownFields...), records[0])
	rows := make([]map[string]string, 2)
	for i, rec := range records[1:] {
		rows[i] = map[string]string{}
		for j, name := range records[0] {
			rows[i][name] = rec[j]
		}
	}
	for i, want := range []struct{ prompt, gen string }{{"64", "0"}, {"0", "16"}} {
		r := rows[i]
		assert.Equal(t, want.prompt, r["n_prompt"])
		assert.Equal(t, want.gen, r["n_gen"])
		assert.Equal(t, "0", r["n_depth"])
		assert.Equal(t, "1", r["n_threads"])
		assert.Equal(t, "2048", r["n_batch"])
		assert.Equal(t, "512", r["n_ubatch"])
		assert.Equal(t, "f16", r["type_k"])
		assert.Equal(t, "0", r["flash_attn"])
		assert.Equal(t, lbCommit, r["build_commit"])
		assert.Equal(t, lbNumber, r["build_number"])
		assert.Equal(t, "CPU", r["backends"])
		assert.Equal(t, tinyModel, r["model_filename"])
		assert.Equal(t, "llama 2M all F32", r["model_type"])
		assert.Equal(t, strconv.FormatInt(tinySpec.Params(), 10), r["model_n_params"])
		assert.Equal(t, strconv.FormatInt(4*tinySpec.Params(), 10), r["model_size"])
		assert.Regexp(t, `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, r["test_time"])
		for _, f := range []string{"avg_ts", "stddev_ts", "median_ts", "min_ts"} {
			assert.Regexp(t, `^\d+\.\d{6}$`, r[f], f)
		}
		avgNs, err := strconv.ParseFloat(r["avg_ns"], 64)
		require.NoError(t, err)
		assert.Greater(t, avgNs, 0.0)
	}
}

// -o json prints the fields of upstream's JSON with the same JSON types,
// llamabench's own fields besides, and samples that make the averages.
func TestLlamaBenchStyleJSON(t *testing.T) {
	res := run(t, "-m", tinyModel, "-p", "64", "-n", "16", "-r", "2", "-t", "1", "-o", "json")
	require.Equal(t, 0, res.Code, res.Stderr)
	var tests []map[string]any
	require.NoError(t, json.Unmarshal([]byte(res.Stdout), &tests), res.Stdout)
	require.Len(t, tests, 2)
	upstream := upstreamJSON(t)[0]
	for _, test := range tests {
		for name, v := range upstream {
			require.Contains(t, test, name)
			assert.IsType(t, v, test[name], name)
		}
		for _, name := range ownFields {
			assert.Contains(t, test, name)
		}
		assert.Len(t, test, len(upstream)+len(ownFields), "no other field")
		checkSamples(t, test, 2)
	}
	assert.Equal(t, 64.0, tests[0]["n_prompt"])
	assert.Equal(t, 16.0, tests[1]["n_gen"])
	assert.Equal(t, false, tests[0]["flash_attn"])

	// llamabench's own reader of llama-bench's JSON takes it
	parsed, err := parseLlamaBench([]byte(res.Stdout))
	require.NoError(t, err)
	assert.Equal(t, lbCommit, parsed.Build)
	require.Len(t, parsed.Rows, 2)
	assert.Equal(t, "pp64", parsed.Rows[0].Test)
	assert.Equal(t, "tg16", parsed.Rows[1].Test)
}

// checkSamples asserts that a test's samples are reps times and tokens/s
// each (tokens × 1e9 / ns), and that the averages, the standard deviations,
// the median and the minimum are theirs.
func checkSamples(t *testing.T, test map[string]any, reps int) {
	t.Helper()
	num := func(v any) float64 { f, _ := v.(float64); return f }
	list := func(v any) []float64 {
		var out []float64
		for _, x := range v.([]any) {
			out = append(out, num(x))
		}
		return out
	}
	ns, ts := list(test["samples_ns"]), list(test["samples_ts"])
	require.Len(t, ns, reps)
	require.Len(t, ts, reps)
	tokens := num(test["n_prompt"]) + num(test["n_gen"])
	for i := range ns {
		assert.InEpsilon(t, tokens*1e9/ns[i], ts[i], 1e-5)
	}
	mean, sd := meanStddev(ns)
	assert.InDelta(t, mean, num(test["avg_ns"]), 0.5)
	assert.InDelta(t, sd, num(test["stddev_ns"]), 0.5)
	mean, sd = meanStddev(ts)
	assert.InEpsilon(t, mean, num(test["avg_ts"]), 1e-5)
	assert.InDelta(t, sd, num(test["stddev_ts"]), 1e-5*mean)
	assert.InEpsilon(t, slices.Min(ts), num(test["min_ts"]), 1e-5)
	assert.InEpsilon(t, newStat(ts).Median, num(test["median_ts"]), 1e-5)
}

// A grid: every combination of the context options, in llama-bench's order
// (type_k, then flash attention, then depth, then the tests), with a
// quantized V cache beside flash attention, one JSON line each.
func TestLlamaBenchStyleGridJSONL(t *testing.T) {
	res := run(t, "-m", tinyModel, "-p", "8", "-n", "0", "-pg", "4,2", "-r", "1", "-t", "1", "-b", "8", "-ub", "4",
		"-fa", "1", "-ctk", "f16,q8_0", "-ctv", "q4_0", "-d", "0-8+8", "-o", "jsonl")
	require.Equal(t, 0, res.Code, res.Stderr)
	var got []string
	sc := bufio.NewScanner(strings.NewReader(res.Stdout))
	for sc.Scan() {
		var test map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &test), sc.Text())
		checkSamples(t, test, 1)
		assert.Equal(t, 8.0, test["n_batch"])
		assert.Equal(t, 4.0, test["n_ubatch"])
		assert.Equal(t, "q4_0", test["type_v"])
		assert.Equal(t, true, test["flash_attn"])
		got = append(got, test["type_k"].(string)+" "+testName(int(test["n_prompt"].(float64)), int(test["n_gen"].(float64)), int(test["n_depth"].(float64))))
	}
	assert.Equal(t, []string{"f16 pp8", "f16 pp4+tg2", "f16 pp8 @ d8", "f16 pp4+tg2 @ d8",
		"q8_0 pp8", "q8_0 pp4+tg2", "q8_0 pp8 @ d8", "q8_0 pp4+tg2 @ d8"}, got)
}

// -o md is llama-bench's table, with the options given other than its
// defaults as columns, median and min t/s besides, which llamabench's own
// reader of llama-bench's markdown takes; -o sql creates llama_bench and
// inserts one row per test.
func TestLlamaBenchStyleMarkdownAndSQL(t *testing.T) {
	res := run(t, "-m", tinyModel, "-p", "16", "-n", "4", "-r", "3", "-t", "1", "-fa", "1", "-d", "4")
	require.Equal(t, 0, res.Code, res.Stderr)
	lines := strings.Split(res.Stdout, "\n")
	require.GreaterOrEqual(t, len(lines), 4)
	assert.Regexp(t, `^\| model +\| +size \| +params \| backend +\| threads \| +fa \| +test \| +t/s \| median t/s \| +min t/s \|$`, lines[0])
	assert.Regexp(t, `^\| llama 2M all F32 +\| +8\.\d\d MiB \| +2\.\d\d M \| CPU +\| +1 \| +1 \| +pp16 @ d4 \| +\d+\.\d\d ± \d+\.\d\d \| +\d+\.\d\d \| +\d+\.\d\d \|$`, lines[2])
	assert.Regexp(t, `\| +tg4 @ d4 \|`, lines[3])
	assert.Contains(t, res.Stdout, "\nbuild: "+lbCommit+" ("+lbNumber+")\n")
	parsed, err := parseLlamaBench([]byte(res.Stdout))
	require.NoError(t, err)
	assert.Equal(t, lbCommit, parsed.Build)
	require.Len(t, parsed.Rows, 2)
	assert.Equal(t, "pp16 @ d4", parsed.Rows[0].Test)
	assert.Equal(t, 1, parsed.Rows[0].Threads)

	// issue 37's command's table has upstream's columns, then llamabench's
	res = run(t, "-m", tinyModel, "-p", "64", "-n", "16", "-r", "2", "-t", "1")
	require.Equal(t, 0, res.Code, res.Stderr)
	up, err := os.ReadFile("testdata/upstream-llama-bench.md")
	require.NoError(t, err)
	upLines, ours := strings.Split(string(up), "\n"), strings.Split(res.Stdout, "\n")
	assert.Equal(t, upLines[0]+" median t/s |    min t/s |", ours[0])
	assert.Equal(t, upLines[1]+" ---------: | ---------: |", ours[1])
	for i := 2; i < 4; i++ {
		// the same model (demo.gguf there, whose 1.7M parameters are 2M
		// too: ?B labelled), backend, threads and test cells, each as wide;
		// t/s as wide and written alike
		theirs, mine := strings.Split(strings.Replace(upLines[i], "llama ?B", "llama 2M", 1), "|"), strings.Split(ours[i], "|")
		for _, c := range []int{1, 4, 5, 6} {
			assert.Equal(t, theirs[c], mine[c], ours[i])
		}
		assert.Equal(t, len(theirs[7]), len(mine[7]))
		assert.Regexp(t, `^ +\d+\.\d\d ± \d+\.\d\d $`, mine[7])
	}

	// -m takes models separated by commas too, as llama-bench's
	res = run(t, "-m", tinyModel+","+tiedModel, "-p", "8", "-n", "2", "-r", "1", "-t", "1", "-o", "sql")
	require.Equal(t, 0, res.Code, res.Stderr)
	fields := append(upstreamFields(t), ownFields...)
	assert.True(t, strings.HasPrefix(res.Stdout, "CREATE TABLE IF NOT EXISTS llama_bench (\n  build_commit TEXT,\n  build_number INTEGER,\n"), res.Stdout)
	assert.Contains(t, res.Stdout, "  avg_ts REAL,\n")
	assert.Contains(t, res.Stdout, "  min_ts REAL\n);\n")
	inserts := strings.Count(res.Stdout, "INSERT INTO llama_bench ("+strings.Join(fields, ", ")+") VALUES ('"+lbCommit+"', '"+lbNumber+"', ")
	assert.Equal(t, 4, inserts)
	assert.Equal(t, 2, strings.Count(res.Stdout, "'"+tiedModel+"'"))
}

// llama-bench's options and the table's do not mix; a grid of threads or
// layers is the llama-bench-style run's; every value is bounded.
func TestLlamaBenchStyleErrors(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		msg  string
	}{
		{"table option", []string{"-p", "64", "--pp", "8"}, "--pp is an option of llamabench's table; -p starts the llama-bench-style run, which does not take it"},
		{"json report", []string{"-o", "csv", "--json", "x.json"}, "--json is an option of llamabench's table; -o starts"},
		{"thread grid in the table", []string{"-t", "1,2"}, "--threads 1,2: the table measures one value; a grid of them is the llama-bench-style run"},
		{"bad format", []string{"-o", "xml"}, "-o xml: the output format must be md, csv, json, jsonl or sql"},
		{"bad range", []string{"-p", "8-4"}, `-p "8-4": range 8-4: the last value is below the first`},
		{"range that does not grow", []string{"-p", "1-8*1"}, "the values would not grow"},
		{"huge range", []string{"-p", "1-100000000"}, "more than 10000 values"},
		{"negative prompt", []string{"-p", "-5"}, `-p "-5": not a comma-separated list`},
		{"bad KV type", []string{"-ctk", "q3_x"}, "-ctk \"q3_x\": q3_x is not a KV cache type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl)"},
		{"quantized V without flash attention", []string{"-ctv", "q8_0", "-fa", "0,1"}, "-ctv q8_0 with -fa 0: a quantized V cache needs flash attention (-fa 1)"},
		{"bad flash attention", []string{"-fa", "2"}, `-fa "2": not a comma-separated list of 0 and 1`},
		{"bad pair", []string{"-pg", "512"}, `-pg "512": not a prompt length and a generation length`},
		{"no test", []string{"-p", "0", "-n", "0"}, "no test to run"},
		{"zero threads", []string{"-p", "8", "-t", "0,1"}, "-t 0: must be from 1 to 512"},
		{"bad layers", []string{"-p", "8", "-ngl", "-2"}, "-ngl -2: must be -1 (all) or from 0 up"},
		{"text layers", []string{"-p", "8", "-ngl", "all"}, `-ngl "all": not a comma-separated list`},
		{"zero batch", []string{"-p", "8", "-b", "0"}, "-b 0: must be from 1 to 1048576"},
		{"too deep", []string{"-p", "8", "-d", "16777216"}, "pp8 @ d16777216: the test and its depth take 16777224 tokens, more than 16776960"},
		{"too many tests", []string{"-p", "1-1000", "-t", "1-100"}, "the options make 100100 tests; at most 100000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, append([]string{"-m", tinyModel}, c.args...)...)
			assert.Equal(t, 2, res.Code, res.Stderr)
			assert.Empty(t, res.Stdout)
			assert.Contains(t, res.Stderr, c.msg)
		})
	}
}

func TestParseIntGrid(t *testing.T) {
	for in, want := range map[string][]int{
		"128,512":        {128, 512},
		"1-4":            {1, 2, 3, 4},
		"64-512*2":       {64, 128, 256, 512},
		"0-4096+1024":    {0, 1024, 2048, 3072, 4096},
		"8, 16-40+16,,1": {8, 16, 32, 1},
		"":               nil,
	} {
		got, err := parseIntGrid(in, false)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	got, err := parseIntGrid("-1,0,99", true)
	require.NoError(t, err)
	assert.Equal(t, []int{-1, 0, 99}, got)
	for _, in := range []string{"x", "1-", "1-x", "4-2", "0-8*2", "1-4+0", "-1", "1.5", "99999999999"} {
		_, err := parseIntGrid(in, false)
		assert.Error(t, err, in)
	}
}

func TestModelLabel(t *testing.T) {
	assert.Equal(t, "llama 45M Q4_0", modelLabel("llama ?B Q4_0", 45_123_456))
	assert.Equal(t, "llama 134M Q8_0", modelLabel("llama ?B Q8_0", 134_105_856))
	assert.Equal(t, "llama 1.2B Q4_K - Medium", modelLabel("llama ?B Q4_K - Medium", 1_235_814_400))
	assert.Equal(t, "llama 7B F16", modelLabel("llama ?B F16", 7_000_000_000))
	assert.Equal(t, "llama 8B Q4_0", modelLabel("llama 8B Q4_0", 8_030_261_248), "llama.cpp's own size class stays")
	assert.Equal(t, "llama 900K F32", modelLabel("llama ?B F32", 900_000))
}

// The last-level cache comes from sysfs: the largest level of a data or
// unified cache, not the instruction cache.
func TestLastLevelCache(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string][3]string{
		"index0": {"1", "Data", "48K"}, "index1": {"1", "Instruction", "32K"},
		"index2": {"2", "Unified", "2048K"}, "index3": {"3", "Unified", "32M"},
	} {
		require.NoError(t, os.MkdirAll(filepath.Join(dir, name), 0o755))
		for i, f := range []string{"level", "type", "size"} {
			require.NoError(t, os.WriteFile(filepath.Join(dir, name, f), []byte(c[i]+"\n"), 0o644))
		}
	}
	assert.Equal(t, cpuCache{Level: 3, Bytes: 32 << 20}, lastLevelCache(dir))
	assert.Equal(t, cpuCache{}, lastLevelCache(filepath.Join(dir, "none")))
	assert.Equal(t, uint64(1024), parseCacheSize("1024"))
	assert.Equal(t, uint64(0), parseCacheSize("big"))
}

// A build is portable (baseline) when the CPU has vector features that
// llama.cpp's system info does not list for the CPU backend.
func TestUnusedFeatures(t *testing.T) {
	flags := strings.Fields("fpu sse2 pni ssse3 avx avx2 fma f16c bmi2 avx512f avx512_vnni")
	native := "CPU : SSE3 = 1 | SSSE3 = 1 | AVX = 1 | AVX2 = 1 | F16C = 1 | FMA = 1 | BMI2 = 1 | AVX512 = 1 | AVX512_VNNI = 1 | LLAMAFILE = 1 | REPACK = 1 | "
	assert.Empty(t, unusedFeatures(native, flags))
	baseline := "CPU : LLAMAFILE = 1 | REPACK = 1 | "
	assert.Equal(t, []string{"AVX", "AVX2", "F16C", "FMA", "AVX512", "AVX512_VNNI"}, unusedFeatures(baseline, flags))
	b := buildFeatures{Unused: []string{"AVX2", "FMA"}}
	assert.True(t, b.portable())
	assert.Contains(t, b.note(), "portable build: llama.cpp was compiled for a baseline CPU and does not use this CPU's AVX2, FMA")
	assert.False(t, buildFeatures{Unused: []string{}}.portable())
	// another backend's features after the CPU's do not count; the CPU's
	// after another's do
	assert.Equal(t, []string{"AVX2"}, unusedFeatures("CPU : AVX = 1 | CUDA : AVX2 = 1 | ", []string{"avx", "avx2"}))
	assert.Empty(t, unusedFeatures("CUDA : ARCHS = 900 | USE_GRAPHS = 1 | CPU : AVX = 1 | AVX2 = 1 | ", []string{"avx", "avx2"}))
}

// The mean and the sample standard deviation (n-1) are llama-bench's avg and
// stdev.
func TestMeanStddev(t *testing.T) {
	m, sd := meanStddev([]float64{2, 4, 4, 4, 5, 5, 7, 9})
	assert.Equal(t, 5.0, m)
	assert.InDelta(t, math.Sqrt(32.0/7), sd, 1e-12)
	m, sd = meanStddev([]float64{3})
	assert.Equal(t, [2]float64{3, 0}, [2]float64{m, sd})
}

func TestStatistics(t *testing.T) {
	s := newStat([]float64{5, 1, 4})
	assert.InDelta(t, 10.0/3, s.Mean, 1e-12)
	assert.InDelta(t, math.Sqrt((25+1+16-3*10.0/3*10.0/3)/2), s.Stddev, 1e-12)
	s.Mean, s.Stddev = 0, 0
	assert.Equal(t, stat{Samples: []float64{5, 1, 4}, Min: 1, Median: 4, Max: 5}, s)
	assert.Equal(t, 2.5, newStat([]float64{4, 1, 2, 3}).Median)
	assert.Equal(t, "Q8_0", quantization("llama ?B Q8_0"))
	assert.Equal(t, "F32", quantization("llama ?B all F32"))
}

// withMean adds its samples' mean and standard deviation to s.
func withMean(s stat) stat {
	s.Mean, s.Stddev = meanStddev(s.Samples)
	return s
}

func TestHelpDocumentsEveryOptionWithItsDefault(t *testing.T) {
	res := run(t, "--help")
	require.Equal(t, 0, res.Code)
	documented := map[string]string{}
	var cur []string
	for _, line := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			cur = nil
			for _, f := range strings.Fields(line) {
				if !strings.HasPrefix(f, "-") {
					break
				}
				cur = append(cur, strings.TrimSuffix(f, ","))
			}
			for _, n := range cur {
				documented[n] = line
			}
		case strings.HasPrefix(line, "    ") && cur != nil:
			for _, n := range cur {
				documented[n] += line
			}
		default:
			cur = nil
		}
	}
	fs := newFlagSet(&options{})
	fs.VisitAll(func(f *flag.Flag) {
		// one dash for -m, and for llama.cpp's -ngl, -ctk...
		spelled := "--" + f.Name
		text, ok := documented[spelled]
		if !ok {
			spelled = "-" + f.Name
			text, ok = documented[spelled]
		}
		if assert.True(t, ok, "option %s is not in the help", spelled) {
			assert.Contains(t, text, "(default: ", spelled)
		}
	})
}
