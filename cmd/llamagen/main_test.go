package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llamaloop/llamaloop/backend"
	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The binary and the models every test uses, made once by TestMain.
var (
	bin       string
	demoModel string
	tinyModel string
	demo      *testmodel.Demo
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "llamagen-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if bin, err = clitest.Build(dir, "llamagen"); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if demo, err = testmodel.NewDemo(); err == nil {
			demoModel = filepath.Join(dir, "demo.gguf")
			err = demo.Write(demoModel)
		}
		if err == nil {
			tinyModel = filepath.Join(dir, "tiny.gguf")
			err = testmodel.WriteRandom(tinyModel, testmodel.TinySpec(gguf.TensorF32))
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// run runs llamagen with one thread (ggml's thread pool spins; tests run
// side by side on few cores).
func run(t *testing.T, stdin string, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, bin, stdin, append([]string{"--threads", "1"}, args...)...)
}

// greedy is the demo model's greedy continuation of text, from its exact
// logits: the argmax after the last token, lowest id among ties.
func greedy(t *testing.T, text string, n int) (tokens []int32, out string) {
	t.Helper()
	prompt := demo.Spec.Vocab.Tokenize(text, true)
	prev := prompt[len(prompt)-1]
	for range n {
		row := demo.Logits(prev)
		best := 0
		for i, v := range row {
			if v > row[best] {
				best = i
			}
		}
		prev = int32(best)
		tokens = append(tokens, prev)
		out += demo.Spec.Vocab.Piece(prev)
		if prev == testmodel.EOS {
			break
		}
	}
	return tokens, out
}

// lines splits JSON-lines output into objects.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var objs []map[string]any
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "line %q", sc.Text())
		objs = append(objs, m)
	}
	return objs
}

func ofType(objs []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, o := range objs {
		if o["type"] == typ {
			out = append(out, o)
		}
	}
	return out
}

func ints(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

var summaryLine = regexp.MustCompile(`^prompt: (\d+) tokens in [0-9.]+ s \([0-9.]+ tokens/s\); generation: (\d+) tokens in [0-9.]+ s \(([0-9.]+|-) tokens/s\)`)

func TestGreedyStreamsTextToStdoutAndSummaryToStderr(t *testing.T) {
	res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "12")
	require.Equal(t, 0, res.Code, res.Stderr)
	_, want := greedy(t, "The model", 12)
	assert.Equal(t, want+"\n", res.Stdout)
	lines := strings.Split(strings.TrimSpace(res.Stderr), "\n")
	require.Len(t, lines, 1, res.Stderr)
	m := summaryLine.FindStringSubmatch(lines[0])
	require.NotNil(t, m, lines[0])
	assert.Equal(t, "3", m[1]) // <s> ▁The ▁model
	assert.Equal(t, "12", m[2])
	assert.Contains(t, lines[0], "CPU, 1 thread")

	echo := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "12", "--echo", "--quiet")
	require.Equal(t, 0, echo.Code, echo.Stderr)
	assert.Equal(t, "The model"+want+"\n", echo.Stdout)
	assert.Empty(t, echo.Stderr, "--quiet hides the summary")
}

// The command finds its llama.cpp wherever it runs: the pinned engine is
// linked in, and a shared external install (make LLAMA_CPP=DIR) through the
// rpath the probe sets, with no LD_LIBRARY_PATH and from a foreign folder.
func TestRunsFromAnyFolderWithoutLibraryPath(t *testing.T) {
	if os.Getenv(clitest.BinDirEnv) != "" {
		t.Skip("a prebuilt command (the GPU bundle) finds its libraries as its bundle says")
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "LD_LIBRARY_PATH=") && !strings.HasPrefix(kv, "DYLD_LIBRARY_PATH=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(bin, "--threads", "1", "-m", demoModel, "-p", "The model", "--max-new-tokens", "4", "--quiet")
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, err := cmd.Output()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		t.Fatalf("%v: %s", err, exit.Stderr)
	}
	require.NoError(t, err)
	_, want := greedy(t, "The model", 4)
	assert.Equal(t, want+"\n", string(out))
}

func TestPromptFromFileAndStdin(t *testing.T) {
	_, want := greedy(t, "A token", 8)
	path := filepath.Join(t.TempDir(), "prompt.txt")
	require.NoError(t, os.WriteFile(path, []byte("A token\n"), 0o644))
	for _, res := range []clitest.Result{
		run(t, "", "-m", demoModel, "-f", path, "--max-new-tokens", "8", "--quiet"),
		run(t, "A token\n", "-m", demoModel, "-f", "-", "--max-new-tokens", "8", "--quiet"),
	} {
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Equal(t, want+"\n", res.Stdout)
	}
}

func TestJSONTokensAndResult(t *testing.T) {
	res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "6", "--json", "--logprobs", "3", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	objs := jsonLines(t, res.Stdout)
	tokens, results := ofType(objs, "token"), ofType(objs, "result")
	require.Len(t, tokens, 6)
	require.Len(t, results, 1)
	require.Len(t, objs, 7, "only token and result objects")

	wantTokens, wantText := greedy(t, "The model", 6)
	prompt := demo.Spec.Vocab.Tokenize("The model", true)
	prev := prompt[len(prompt)-1]
	var text string
	for i, tok := range tokens {
		id := int32(tok["token"].(float64))
		assert.Equal(t, wantTokens[i], id)
		assert.Equal(t, 0.0, tok["row"])
		text += tok["text"].(string)
		// the log-probability is the log-softmax of the model's exact logits
		lp := demo.NextLogProbs(prev)
		assert.InDelta(t, lp[id], tok["logprob"].(float64), 1e-3)
		top := tok["top"].([]any)
		require.Len(t, top, 3)
		for j, alt := range top {
			a := alt.(map[string]any)
			assert.InDelta(t, lp[int32(a["token"].(float64))], a["logprob"].(float64), 1e-3)
			assert.IsType(t, "", a["text"])
			if j > 0 {
				assert.LessOrEqual(t, a["logprob"].(float64), top[j-1].(map[string]any)["logprob"].(float64))
			}
		}
		assert.Equal(t, float64(id), top[0].(map[string]any)["token"], "greedy takes the most probable token")
		prev = id
	}
	r := results[0]
	assert.Equal(t, wantText, r["text"])
	assert.Equal(t, text, r["text"])
	assert.Equal(t, wantTokens, ints(r["tokens"]))
	assert.Equal(t, "length", r["finish"])
	assert.Equal(t, "The model", r["prompt"])
	assert.Equal(t, 3.0, r["prompt_tokens"])
	assert.Equal(t, 0.0, r["sequence"])
	assert.Equal(t, 0.0, r["prompt_index"])
}

func TestPromptsFileIsOneLabelledBatch(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prompts.txt")
	content := "The model\n\n\"Beam search\"\n{\"prompt\": \"A token\"}\n"
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	prompts := []string{"The model", "Beam search", "A token"}

	res := run(t, "", "-m", demoModel, "--prompts", path, "--max-new-tokens", "7", "--json")
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 3)
	slices.SortFunc(results, func(a, b map[string]any) int { return int(a["prompt_index"].(float64) - b["prompt_index"].(float64)) })
	for i, r := range results {
		want, _ := greedy(t, prompts[i], 7)
		assert.Equal(t, prompts[i], r["prompt"])
		assert.Equal(t, want, ints(r["tokens"]), "rows of a batch are independent")
	}
	assert.Contains(t, res.Stderr, "3 sequences")

	text := run(t, "", "-m", demoModel, "--prompts", path, "--max-new-tokens", "7", "--quiet")
	require.Equal(t, 0, text.Code, text.Stderr)
	var want strings.Builder
	for i, p := range prompts {
		_, out := greedy(t, p, 7)
		fmt.Fprintf(&want, "[%d] %s\n%s\n[7 tokens, length]\n\n", i+1, p, out)
	}
	assert.Equal(t, want.String(), text.Stdout)
}

func TestSamplingIsReproducibleBySeed(t *testing.T) {
	args := []string{"-m", demoModel, "-p", "The model", "--max-new-tokens", "16", "--do-sample", "--quiet", "--json"}
	var single []string
	for seed := 7; seed < 10; seed++ {
		res := run(t, "", append(args, "--seed", fmt.Sprint(seed))...)
		require.Equal(t, 0, res.Code, res.Stderr)
		single = append(single, ofType(jsonLines(t, res.Stdout), "result")[0]["text"].(string))
	}
	again := run(t, "", append(args, "--seed", "7")...)
	assert.Equal(t, single[0], ofType(jsonLines(t, again.Stdout), "result")[0]["text"])
	assert.False(t, single[0] == single[1] && single[1] == single[2], "three seeds, one text: %q", single)

	// --num-return-sequences N samples with seeds seed, seed+1, ...
	multi := run(t, "", append(args, "--seed", "7", "--num-return-sequences", "3")...)
	require.Equal(t, 0, multi.Code, multi.Stderr)
	results := ofType(jsonLines(t, multi.Stdout), "result")
	require.Len(t, results, 3)
	for _, r := range results {
		assert.Equal(t, single[int(r["sequence"].(float64))], r["text"])
	}
}

func TestSamplingWithTopK1IsGreedy(t *testing.T) {
	want, _ := greedy(t, "The model", 10)
	cfg := filepath.Join(t.TempDir(), "generation_config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"do_sample": true, "top_k": 5, "max_new_tokens": 10}`), 0o644))
	// the file samples among 5 tokens; the command line narrows it to 1
	res := run(t, "", "-m", demoModel, "-p", "The model", "--generation-config", cfg, "--top-k", "1", "--seed", "3", "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Equal(t, want, ints(ofType(jsonLines(t, res.Stdout), "result")[0]["tokens"]))
}

func TestGenerationConfigLengthAndOverride(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "generation_config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"max_new_tokens": 5, "transformers_version": "4.57.0"}`), 0o644))
	for _, c := range []struct {
		args []string
		want int
	}{
		{nil, 5},
		{[]string{"--max-new-tokens", "3"}, 3},
	} {
		res := run(t, "", append([]string{"-m", demoModel, "-p", "The model", "--generation-config", cfg, "--json", "--quiet"}, c.args...)...)
		require.Equal(t, 0, res.Code, res.Stderr)
		assert.Len(t, ints(ofType(jsonLines(t, res.Stdout), "result")[0]["tokens"]), c.want)
	}
	// without any length the default is 128 new tokens
	res := run(t, "", "-m", demoModel, "-p", "The model", "--json", "--quiet", "--ctx", "256")
	require.Equal(t, 0, res.Code, res.Stderr)
	r := ofType(jsonLines(t, res.Stdout), "result")[0]
	if r["finish"] == "length" {
		assert.Len(t, ints(r["tokens"]), defaultMaxNewTokens)
	}
}

func TestStopStrings(t *testing.T) {
	_, full := greedy(t, "The model", 20)
	res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "20", "--stop-strings", "logits", "--json", "--quiet")
	require.Equal(t, 0, res.Code, res.Stderr)
	r := ofType(jsonLines(t, res.Stdout), "result")[0]
	assert.Equal(t, "stop", r["finish"])
	assert.Equal(t, "logits", r["stop_string"])
	text := r["text"].(string)
	assert.True(t, strings.HasSuffix(text, "logits"), text)
	assert.True(t, strings.HasPrefix(full, text), "%q is not a prefix of %q", text, full)
}

// --max-time is checked after each token on the app's clock: one that
// moves 10 ms per reading (the first at the start) ends a generation of
// --max-time 0.05 after its 5th token, whatever the machine's speed.
func TestMaxTimeStopsGeneration(t *testing.T) {
	readings := 0
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, interrupts: make(chan os.Signal),
		now: func() time.Time {
			readings++
			return time.Unix(0, 0).Add(time.Duration(readings-1) * 10 * time.Millisecond)
		}}
	code := a.main([]string{"--threads", "1", "-m", tinyModel, "-p", "hello", "--max-new-tokens", "1900", "--min-new-tokens", "1900",
		"--max-time", "0.05", "--json", "--quiet"})
	require.Equal(t, 0, code, stderr.String())
	r := ofType(jsonLines(t, stdout.String()), "result")[0]
	assert.Equal(t, "max_time", r["finish"])
	assert.Len(t, r["tokens"], 5)
	assert.Equal(t, 6, readings, "the start and one reading per token")
}

func TestMirostatRuns(t *testing.T) {
	args := []string{"-m", demoModel, "-p", "The model", "--max-new-tokens", "12", "--mirostat", "2", "--mirostat-tau", "3", "--seed", "5"}
	a, b := run(t, "", args...), run(t, "", args...)
	require.Equal(t, 0, a.Code, a.Stderr)
	assert.NotEmpty(t, a.Stdout)
	assert.Equal(t, a.Stdout, b.Stdout)
	assert.Contains(t, a.Stderr, "seed 5")
}

func TestBeamSearch(t *testing.T) {
	res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "10", "--num-beams", "4", "--num-return-sequences", "3", "--json")
	require.Equal(t, 0, res.Code, res.Stderr)
	objs := jsonLines(t, res.Stdout)
	assert.Empty(t, ofType(objs, "token"), "beam search cannot stream")
	results := ofType(objs, "result")
	require.Len(t, results, 3)
	for i, r := range results {
		assert.Equal(t, float64(i), r["sequence"])
		assert.Contains(t, []any{"eos", "length"}, r["finish"])
		if i > 0 {
			assert.LessOrEqual(t, r["score"].(float64), results[i-1]["score"].(float64), "best first")
		}
		// the score is the length-normalised sum of the model's log-probabilities
		assert.InDelta(t, demoScore("The model", ints(r["tokens"])), r["score"].(float64), 1e-3)
	}
	assert.Contains(t, res.Stderr, "beam search, 4 beams")
}

func TestChatReadsTurnsFromStdin(t *testing.T) {
	res := run(t, "hello\n\nwhat is a token\n", "-m", demoModel, "--chat", "--max-new-tokens", "8", "--json", "--system", "be brief")
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 2, "two turns; the empty line is skipped")
	assert.Equal(t, "hello", results[0]["prompt"])
	assert.Equal(t, "what is a token", results[1]["prompt"])
	// the second turn's prompt holds the whole conversation
	assert.Greater(t, results[1]["prompt_tokens"].(float64), results[0]["prompt_tokens"].(float64)+8)
	assert.NotContains(t, res.Stderr, "> ", "no prompt when stdin is not a terminal")
	assert.Len(t, strings.Split(strings.TrimSpace(res.Stderr), "\n"), 2, "one summary per turn")
}

func TestDemoShowsFiveMethods(t *testing.T) {
	res := run(t, "", "-m", demoModel, "--demo")
	require.Equal(t, 0, res.Code, res.Stderr)
	_, want := greedy(t, "The model", 4)
	for _, s := range []string{"greedy", "sampling", "Mirostat v2", "beam search", "speculative greedy", "| The model" + want} {
		assert.Contains(t, res.Stdout, s)
	}
	js := run(t, "", "-m", demoModel, "--demo", "--json", "--max-new-tokens", "9")
	require.Equal(t, 0, js.Code, js.Stderr)
	results := ofType(jsonLines(t, js.Stdout), "result")
	require.Len(t, results, 5)
	var methods []string
	for _, r := range results {
		methods = append(methods, r["method"].(string))
		assert.LessOrEqual(t, len(r["tokens"].([]any)), 9)
	}
	assert.Equal(t, []string{"greedy", "sampling", "Mirostat v2", "beam search", "speculative greedy"}, methods)
	greedyTokens, _ := greedy(t, "The model", 9)
	assert.Equal(t, greedyTokens, ints(results[0]["tokens"]))
	assert.Equal(t, greedyTokens, ints(results[4]["tokens"]))
}

func TestErrorsAreOneLine(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "notes.txt")
	require.NoError(t, os.WriteFile(notGGUF, []byte("hello"), 0o644))
	for _, c := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"missing model", []string{"-m", filepath.Join(dir, "nope.gguf"), "-p", "x"}, 1, "does not exist"},
		{"not a GGUF file", []string{"-m", notGGUF, "-p", "x"}, 1, "not a GGUF file"},
		{"no model", []string{"-p", "x"}, 2, "no model"},
		{"no prompt", []string{"-m", demoModel}, 2, "no prompt"},
		{"unknown option", []string{"-m", demoModel, "-p", "x", "--bogus"}, 2, "unknown option --bogus"},
		{"bad number", []string{"-m", demoModel, "-p", "x", "--top-p", "high"}, 2, "--top-p \"high\": not a number"},
		{"missing value", []string{"-m", demoModel, "-p", "x", "--top-k"}, 2, "--top-k needs a value"},
		{"invalid config", []string{"-m", demoModel, "-p", "x", "--do-sample", "--temperature", "0"}, 2, "--temperature 0: temperature (=0)"},
		{"invalid penalty", []string{"-m", demoModel, "-p", "x", "--repetition-penalty", "0"}, 2, "--repetition-penalty 0: repetition_penalty"},
		{"two invalid settings", []string{"-m", demoModel, "-p", "x", "--do-sample", "--top-p", "-0.5", "--typical-p", "0"}, 2,
			"--top-p -0.5: top_p (=-0.5) has to be a float in [0, 1]; --typical-p 0: typical_p (=0)"},
		{"mirostat version", []string{"-m", demoModel, "-p", "x", "--mirostat", "3"}, 2, "--mirostat 3"},
		{"two prompts", []string{"-m", demoModel, "-p", "x", "-f", notGGUF}, 2, "only one of"},
		{"missing prompts file", []string{"-m", demoModel, "--prompts", filepath.Join(dir, "none.txt")}, 1, "--prompts"},
		{"prompt too long", []string{"-m", demoModel, "-p", strings.Repeat("model ", 300), "--ctx", "256"}, 1, "prompt"},
		{"bad generation config", []string{"-m", demoModel, "-p", "x", "--generation-config", notGGUF}, 1, "--generation-config"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, "", c.args...)
			assert.Equal(t, c.code, res.Code, res.Stderr)
			assert.Empty(t, res.Stdout)
			lines := strings.Split(strings.TrimRight(res.Stderr, "\n"), "\n")
			require.Len(t, lines, 1, res.Stderr)
			assert.True(t, strings.HasPrefix(lines[0], "llamagen: "), lines[0])
			assert.Contains(t, lines[0], c.msg)
		})
	}
}

func TestHelpDocumentsEveryOptionWithItsDefault(t *testing.T) {
	res := clitest.Run(t, bin, "", "--help")
	require.Equal(t, 0, res.Code)
	assert.Empty(t, res.Stderr)
	// option blocks: a line starting with "  -" and its continuation lines
	blocks := map[string]string{}
	var cur string
	for _, line := range strings.Split(res.Stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			cur = line
			blocks[cur] = line
		case strings.HasPrefix(line, "    ") && cur != "":
			blocks[cur] += " " + strings.TrimSpace(line)
		default:
			cur = ""
		}
	}
	documented := map[string]string{} // spelled option -> its block
	for head, text := range blocks {
		for _, f := range strings.Fields(head) {
			if !strings.HasPrefix(f, "-") {
				break
			}
			documented[strings.TrimSuffix(f, ",")] = text
		}
	}
	fs := newFlagSet(&options{}, nil)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		spelled := "--" + f.Name
		if len(f.Name) == 1 {
			spelled = "-" + f.Name
		}
		text, ok := documented[spelled]
		if assert.True(t, ok, "option %s is not in the help", spelled) {
			assert.Contains(t, text, "(default: ", "option %s", spelled)
		}
	})
	assert.Greater(t, n, 50)
}

func TestProgressBarOnlyOnATerminal(t *testing.T) {
	args := []string{"--threads", "1", "-m", demoModel, "-p", "The model", "--max-new-tokens", "4"}
	stdout, term, code := clitest.RunWithTerminalStderr(t, bin, args...)
	require.Equal(t, 0, code, term)
	assert.Contains(t, term, "loading demo.gguf [")
	assert.Contains(t, term, "100%")
	assert.Contains(t, term, "generation: 4 tokens", "the summary goes to the terminal too")
	assert.NotContains(t, stdout, "loading")
	_, want := greedy(t, "The model", 4)
	assert.Equal(t, want+"\n", stdout)

	piped := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "4")
	require.Equal(t, 0, piped.Code)
	assert.NotContains(t, piped.Stderr, "loading")
	assert.NotContains(t, piped.Stderr, "\r")
}

func TestInterruptKeepsWhatWasPrinted(t *testing.T) {
	cmd := exec.Command(bin, "--threads", "1", "-m", tinyModel, "-p", "hello world",
		"--max-new-tokens", "1900", "--min-new-tokens", "1900")
	var stderr bytes.Buffer
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	// wait for generation to be under way
	first := make([]byte, 16)
	_, err = io.ReadFull(stdout, first)
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	rest := new(bytes.Buffer)
	_, _ = rest.ReadFrom(stdout)
	// A hang is killed near the test's own deadline, not after a fixed
	// 30 s that a loaded machine could pass; the exit code then says so.
	if d, ok := t.Deadline(); ok {
		defer time.AfterFunc(time.Until(d)-5*time.Second, func() { cmd.Process.Kill() }).Stop()
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 130, exit.ExitCode())
	assert.True(t, strings.HasSuffix(stderr.String(), "llamagen: interrupted\n"), stderr.String())
	assert.Regexp(t, summaryLine, stderr.String(), "the summary of what was generated")
	out := append(first, rest.Bytes()...)
	assert.True(t, bytes.HasSuffix(out, []byte("\n")), "the output ends its line")
	m := regexp.MustCompile(`generation: (\d+) tokens`).FindStringSubmatch(stderr.String())
	require.NotNil(t, m)
	n, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	assert.Less(t, n, 1900, "stopped early")
}

func TestParsePromptLine(t *testing.T) {
	for _, c := range []struct {
		line string
		want prompt
		err  string
	}{
		{"plain text", prompt{Text: "plain text"}, ""},
		{`  "a \"quoted\"\nprompt"`, prompt{Text: "a \"quoted\"\nprompt"}, ""},
		{`{"prompt": "x"}`, prompt{Text: "x"}, ""},
		{`{"messages": [{"role": "user", "content": "hi"}]}`, prompt{Messages: []backend.Message{{Role: "user", Content: "hi"}}}, ""},
		{`{"prompt": "x", "messages": [{"role": "user", "content": "hi"}]}`, prompt{}, "not both"},
		{`{"text": "x"}`, prompt{}, "unknown field"},
		{`{}`, prompt{}, `needs "prompt" or "messages"`},
		{`{"messages": [{"content": "hi"}]}`, prompt{}, "no role"},
		{`"unterminated`, prompt{}, "invalid JSON string"},
	} {
		got, err := parsePromptLine(c.line)
		if c.err != "" {
			assert.ErrorContains(t, err, c.err, c.line)
			continue
		}
		require.NoError(t, err, c.line)
		assert.Equal(t, c.want, got, c.line)
	}
	ps, err := readPrompts(strings.NewReader("a\n\n  \nb\r\n"))
	require.NoError(t, err)
	assert.Equal(t, []prompt{{Text: "a"}, {Text: "b"}}, ps)
	_, err = readPrompts(strings.NewReader("\n\n"))
	assert.ErrorContains(t, err, "no prompt")
	_, err = readPrompts(strings.NewReader("ok\n{bad\n"))
	assert.ErrorContains(t, err, "line 2")
}

func TestConfigOptionsBecomeJSON(t *testing.T) {
	o, err := parseArgs([]string{"-m", "x.gguf", "-p", "x", "--top-k", "7", "--do-sample", "--early-stopping", "never",
		"--suppress-tokens", "3, 5", "--eos-token-id", "[2,9]", "--stop-strings", "a", "--stop-strings", "b c",
		"--exponential-decay-length-penalty", "4,1.5", "--bad-words-ids", "[[1],[2,3]]", "--min-p", "0.05"}, nil)
	require.NoError(t, err)
	got := map[string]string{}
	for k, v := range o.overrides {
		got[k] = string(v)
	}
	assert.Equal(t, map[string]string{"top_k": "7", "do_sample": "true", "early_stopping": `"never"`,
		"suppress_tokens": "[3,5]", "eos_token_id": "[2,9]", "stop_strings": `["a","b c"]`,
		"exponential_decay_length_penalty": "[4,1.5]", "bad_words_ids": "[[1],[2,3]]", "min_p": "0.05"}, got)

	cfg, warnings, err := o.generationConfig(0)
	require.NoError(t, err)
	assert.Equal(t, []string{"early_stopping (=never) is set but num_beams is 1: it only applies to beam search and is ignored"}, warnings)
	assert.Equal(t, 7, cfg.TopK)
	assert.True(t, cfg.DoSample)
	assert.Equal(t, defaultMaxNewTokens, *cfg.MaxNewTokens, "llamagen's length when nothing sets one")
	assert.Equal(t, []string{"a", "b c"}, cfg.StopStrings)
	assert.InDelta(t, 0.05, *cfg.MinP, 0)

	// --max-length alone keeps transformers' rule: no default max_new_tokens
	o, err = parseArgs([]string{"-m", "x.gguf", "-p", "x", "--max-length", "30"}, nil)
	require.NoError(t, err)
	cfg, _, err = o.generationConfig(0)
	require.NoError(t, err)
	assert.Nil(t, cfg.MaxNewTokens)
	assert.Equal(t, 30, cfg.MaxLength)

	// warnings from transformers' validation are returned, not fatal
	o, err = parseArgs([]string{"-m", "x.gguf", "-p", "x", "--temperature", "0.5"}, nil)
	require.NoError(t, err)
	_, warnings, err = o.generationConfig(0)
	require.NoError(t, err)
	require.NotEmpty(t, warnings)
	assert.Contains(t, warnings[0], "do_sample")

	for _, bad := range [][]string{
		{"--top-k", "1.5"}, {"--do-sample=maybe"}, {"--early-stopping", "soon"},
		{"--suppress-tokens", "a,b"}, {"--exponential-decay-length-penalty", "4"}, {"--sequence-bias", "[["},
	} {
		_, err := parseArgs(append([]string{"-m", "x.gguf", "-p", "x"}, bad...), nil)
		assert.Error(t, err, "%q", bad)
	}
}

// A setting that the generation config rejects is named by the option that set it, or by the file,
// and the config's *genconfig.FieldError stays reachable.
func TestSettingErrorsNameTheOption(t *testing.T) {
	o, err := parseArgs([]string{"-m", "x.gguf", "-p", "x", "--do-sample", "--temperature", "-1"}, nil)
	require.NoError(t, err)
	_, _, err = o.generationConfig(0)
	require.Error(t, err)
	assert.Equal(t, "invalid generation settings: --temperature -1: temperature (=-1) has to be a strictly positive float",
		err.Error())
	var usage *cli.UsageError
	assert.ErrorAs(t, err, &usage, "a usage error: exit status 2")
	var fe *genconfig.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "Temperature", fe.Field)

	// From the file: the message names the file; the command line wins where it sets the field.
	cfgFile := filepath.Join(t.TempDir(), "generation_config.json")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`{"do_sample": true, "top_p": -0.5, "temperature": 0.5}`), 0o644))
	o, err = parseArgs([]string{"-m", "x.gguf", "-p", "x", "--generation-config", cfgFile, "--temperature", "0"}, nil)
	require.NoError(t, err)
	_, _, err = o.generationConfig(0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--temperature 0: temperature (=0) has to be a strictly positive float")
	assert.Contains(t, err.Error(), "top_p (=-0.5) has to be a float in [0, 1] (set by --generation-config "+cfgFile+")")

	// A value of the wrong type, found when the option's JSON is applied.
	o, err = parseArgs([]string{"-m", "x.gguf", "-p", "x", "--sequence-bias", `{"1": 2.0}`}, nil)
	require.NoError(t, err)
	_, _, err = o.generationConfig(0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--sequence-bias ")
	assert.Contains(t, err.Error(), ": sequence_bias (=")
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "SequenceBias", fe.Field)
}

func TestWrapWords(t *testing.T) {
	assert.Equal(t, []string{"aa bb", "cc", "dddddddd"}, wrapWords("aa bb cc dddddddd", 6))
	assert.Equal(t, []string{""}, wrapWords("", 6))
}

// An output of invalid UTF-8 (byte tokens biased to spell E2 82 41, the
// first two bytes of a three-byte character then "A", over and over): the
// texts of the token (and text) objects join up to the result's text, each
// byte outside a character one U+FFFD, as the bytes of the tokens say.
func TestJSONInvalidUTF8(t *testing.T) {
	b := func(x byte) int32 { return testmodel.FirstByte + int32(x) }
	bias := fmt.Sprintf("[[[%d],100.0],[[%d,%d],200.0],[[%d,%d],200.0],[[%d,%d],200.0]]",
		b(0xE2), b(0xE2), b(0x82), b(0x82), b('A'), b('A'), b(0xE2))
	for _, n := range []string{"7", "8", "9"} {
		res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", n, "--sequence-bias", bias, "--json", "--quiet")
		require.Equal(t, 0, res.Code, res.Stderr)
		objs := jsonLines(t, res.Stdout)
		results := ofType(objs, "result")
		require.Len(t, results, 1)
		var raw []byte
		for _, id := range ints(results[0]["tokens"]) {
			require.GreaterOrEqual(t, id, testmodel.FirstByte, "a byte token")
			require.Less(t, id, testmodel.FirstByte+256, "a byte token")
			raw = append(raw, byte(id-testmodel.FirstByte))
		}
		require.Equal(t, []byte("\xe2\x82A\xe2\x82A\xe2\x82A")[:len(raw)], raw, "the bias spells E2 82 41")
		var want strings.Builder
		for i := 0; i < len(raw); {
			r, size := utf8.DecodeRune(raw[i:])
			want.WriteRune(r) // utf8.RuneError for each byte outside a character
			i += size
		}
		var joined string
		for _, o := range objs {
			if o["type"] == "token" || o["type"] == "text" {
				joined += o["text"].(string)
			}
		}
		assert.Equal(t, want.String(), results[0]["text"], n)
		assert.Equal(t, want.String(), joined, n)
	}
}
