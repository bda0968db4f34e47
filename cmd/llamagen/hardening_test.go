package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llamaloop/llamaloop/internal/testkit/clitest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// badInvocation is a command line that llamagen must refuse with one line
// on stderr naming the user's option and what it accepts.
type badInvocation struct {
	args []string
	code int
	msg  string
}

// Every numeric option with bad values (NaN, infinities, negative, zero,
// huge, empty, wrong type): the message names the option as the user spelled
// it and the accepted range, never an internal field ("ContextSize") or
// encoding/json's words ("json: unsupported value").
var badInvocations = []badInvocation{
	// generation-config options: integers
	{[]string{"--max-new-tokens", "0"}, 2, `--max-new-tokens "0": must be from 1 to 16777216`},
	{[]string{"--max-new-tokens", "2000000000"}, 2, `--max-new-tokens "2000000000": must be from 1 to 16777216`},
	{[]string{"--max-new-tokens", "99999999999999999999"}, 2, `--max-new-tokens "99999999999999999999": must be from 1 to 16777216`},
	{[]string{"--max-new-tokens", "1.5"}, 2, `--max-new-tokens "1.5": not an integer`},
	{[]string{"--max-new-tokens", ""}, 2, `--max-new-tokens "": not an integer`},
	{[]string{"--max-length", "-1"}, 2, `--max-length "-1": must be from 1 to 16777216`},
	{[]string{"--min-new-tokens", "-1"}, 2, `--min-new-tokens "-1": must be from 0 to 16777216`},
	{[]string{"--min-length", "2000000000"}, 2, `--min-length "2000000000": must be from 0 to 16777216`},
	{[]string{"--num-beams", "0"}, 2, `--num-beams "0": must be from 1 to 256`},
	{[]string{"--num-beams", "100000"}, 2, `--num-beams "100000": must be from 1 to 256`},
	{[]string{"--num-return-sequences", "100000", "--do-sample"}, 2, `--num-return-sequences "100000": must be from 1 to 65536`},
	{[]string{"--top-k", "-1"}, 2, `--top-k "-1": must be from 0 to 2147483647`},
	{[]string{"--top-k", "abc"}, 2, `--top-k "abc": not an integer`},
	{[]string{"--no-repeat-ngram-size", "2000000000"}, 2, `--no-repeat-ngram-size "2000000000": must be from 0 to 16777216`},
	{[]string{"--encoder-no-repeat-ngram-size", "-2"}, 2, `--encoder-no-repeat-ngram-size "-2": must be from 0 to 16777216`},
	{[]string{"--forced-bos-token-id", "99999999999"}, 2, `--forced-bos-token-id "99999999999": must be from -2147483648 to 2147483647`},
	{[]string{"--forced-bos-token-id", "-1"}, 2, `--forced-bos-token-id -1: forced_bos_token_id (=-1) is not a token id of the vocabulary (size 1384)`},
	// generation-config options: numbers
	{[]string{"--temperature", "Inf"}, 2, `--temperature "Inf": not a finite number`},
	{[]string{"--temperature", "-Inf"}, 2, `--temperature "-Inf": not a finite number`},
	{[]string{"--temperature", "NaN"}, 2, `--temperature "NaN": not a finite number`},
	{[]string{"--temperature", "1e999"}, 2, `--temperature "1e999": not a finite number`},
	{[]string{"--temperature", "0", "--do-sample"}, 2, `--temperature 0: temperature (=0) has to be a strictly positive float`},
	{[]string{"--temperature", "warm"}, 2, `--temperature "warm": not a number`},
	{[]string{"--top-p", "Inf"}, 2, `--top-p "Inf": not a finite number`},
	{[]string{"--top-p", "-1", "--do-sample"}, 2, `--top-p -1: top_p (=-1) has to be a float in [0, 1]`},
	{[]string{"--min-p", "2", "--do-sample"}, 2, `--min-p 2: min_p (=2) has to be a float in [0, 1]`},
	{[]string{"--typical-p", "0", "--do-sample"}, 2, `--typical-p 0: typical_p (=0) has to be a float in (0, 1)`},
	{[]string{"--epsilon-cutoff", "NaN"}, 2, `--epsilon-cutoff "NaN": not a finite number`},
	{[]string{"--eta-cutoff", "-Inf"}, 2, `--eta-cutoff "-Inf": not a finite number`},
	{[]string{"--repetition-penalty", "0"}, 2, `--repetition-penalty 0: repetition_penalty (=0) has to be a strictly positive float`},
	{[]string{"--repetition-penalty", "Inf"}, 2, `--repetition-penalty "Inf": not a finite number`},
	{[]string{"--encoder-repetition-penalty", "-1"}, 2, `--encoder-repetition-penalty -1: encoder_repetition_penalty (=-1) has to be a strictly positive float`},
	{[]string{"--length-penalty", "Inf"}, 2, `--length-penalty "Inf": not a finite number`},
	{[]string{"--max-time", "Inf"}, 2, `--max-time "Inf": not a finite number`},
	{[]string{"--max-time", "0"}, 2, `--max-time "0": must be more than 0 seconds`},
	{[]string{"--max-time", "-1"}, 2, `--max-time "-1": must be more than 0 seconds`},
	{[]string{"--exponential-decay-length-penalty", "NaN,1"}, 2, `--exponential-decay-length-penalty "NaN,1": START and FACTOR must be finite numbers`},
	{[]string{"--exponential-decay-length-penalty", "4"}, 2, `--exponential-decay-length-penalty "4": not START,FACTOR`},
	// other generation-config options
	{[]string{"--stop-strings", ""}, 2, `--stop-strings "": a stop string cannot be empty`},
	{[]string{"--do-sample=maybe"}, 2, `--do-sample "maybe": not true or false`},
	{[]string{"--do-sample="}, 2, `--do-sample "": not true or false`},
	{[]string{"--early-stopping", "soon"}, 2, `--early-stopping "soon": not true, false or never`},
	{[]string{"--suppress-tokens", ""}, 2, `--suppress-tokens "": not a list of token ids`},
	{[]string{"--bad-words-ids", "[]"}, 2, `--bad-words-ids []: bad_words_ids (=[]) has to be a non-empty list`},
	{[]string{"--sequence-bias", "[[[1],NaN]]"}, 2, `--sequence-bias "[[[1],NaN]]": not valid JSON`},
	// llamagen's own options
	{[]string{"--threads", "0"}, 2, "--threads 0: must be from 1 to 512"},
	{[]string{"--threads", "100000"}, 2, "--threads 100000: must be from 1 to 512"},
	{[]string{"--threads", "many"}, 2, `--threads "many": not an integer`},
	{[]string{"--ctx", "-1"}, 2, "--ctx -1: must be from 1 to 16777216 cells (or 0 for automatic)"},
	{[]string{"--ctx", "2147483647"}, 2, "--ctx 2147483647: must be from 1 to 16777216 cells"},
	{[]string{"--ctx", "99999999999999999999"}, 2, `--ctx "99999999999999999999": not an integer from`},
	{[]string{"--parallel", "0"}, 2, "--parallel 0: must be from 1 to 256"},
	{[]string{"--parallel", "100000"}, 2, "--parallel 100000: must be from 1 to 256"},
	{[]string{"--logprobs", "-1"}, 2, "--logprobs -1: must be 0 (off) or more"},
	{[]string{"--seed", "-2"}, 2, "--seed -2: must be -1 (a random seed) or from 0 up"},
	{[]string{"--seed", "x"}, 2, `--seed "x": not an integer`},
	{[]string{"--gpu-layers", "-2"}, 2, "--gpu-layers -2: must be -1 (all) or from 0 up"},
	{[]string{"--mirostat", "3"}, 2, "--mirostat 3: must be 0 (off), 1 or 2"},
	{[]string{"--mirostat", "2", "--mirostat-tau", "NaN"}, 2, "--mirostat-tau NaN: must be a finite number of bits above 0"},
	{[]string{"--mirostat", "2", "--mirostat-tau", "0"}, 2, "--mirostat-tau 0: must be a finite number of bits above 0"},
	{[]string{"--mirostat", "2", "--mirostat-eta", "Inf"}, 2, "--mirostat-eta +Inf: must be a finite rate of 0 or more"},
	{[]string{"--mirostat", "2", "--mirostat-eta", "-1"}, 2, "--mirostat-eta -1: must be a finite rate of 0 or more"},
	{[]string{"--mirostat-eta", ""}, 2, `--mirostat-eta "": not a number`},
}

func TestBadInvocations(t *testing.T) {
	for _, c := range badInvocations {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			res := run(t, "", append([]string{"-m", demoModel, "-p", "x", "--max-new-tokens", "2"}, c.args...)...)
			assert.Equal(t, c.code, res.Code, res.Stderr)
			assert.Empty(t, res.Stdout)
			lines := strings.Split(strings.TrimRight(res.Stderr, "\n"), "\n")
			require.Len(t, lines, 1, res.Stderr)
			assert.Contains(t, lines[0], c.msg)
			for _, internal := range []string{"json:", "ContextSize", "Sequences ", "thread counts", "request 0", "parse error", "genconfig:"} {
				assert.NotContains(t, lines[0], internal)
			}
		})
	}
}

// Every field of a generation_config.json with a bad value: the message
// names the file and the field (as transformers spells it) and what it takes.
func TestBadGenerationConfigFiles(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct{ json, msg string }{
		{`{"temperature": "hot"}`, `temperature (="hot") must be a number`},
		{`{"temperature": 1e999}`, `temperature (=1e999) must be a number within`},
		{`{"max_length": 99999999999}`, `max_length (=99999999999) must be an integer in [-2147483648, 2147483647]`},
		{`{"max_new_tokens": 1.5}`, `max_new_tokens (=1.5) must be an integer`},
		{`{"max_time": -1}`, `max_time (=-1) must be more than 0 seconds (set by --generation-config`},
		{`{"stop_strings": [""]}`, `stop_strings (="") must not be empty (set by --generation-config`},
		{`{"do_sample": 1}`, `do_sample (=1) must be true or false`},
		{`{"early_stopping": "soon"}`, `early_stopping (="soon") must be true, false or "never"`},
		{`{"bad_words_ids": [[-1]]}`, `bad_words_ids (=[-1]) has to be a list of lists of non-negative integers`},
		{`{"eos_token_id": "a"}`, `eos_token_id (="a") must be a token id or a list of token ids`},
		{`[1]`, `want a JSON object, got a JSON array`},
		{"{\n\"a\": nope}", `invalid JSON at line 2, column 7`},
		// The command line's bounds hold for the file's fields (a config of
		// 55 bytes ran llamagen out of memory at 3.6 GB).
		{`{"do_sample": true, "num_return_sequences": 999999999}`, `num_return_sequences (=999999999) must be at most 65536 (set by --generation-config`},
		{`{"num_beams": 257}`, `num_beams (=257) must be at most 256`},
		{`{"min_new_tokens": 16777217}`, `min_new_tokens (=16777217) must be at most 16777216`},
		{`{"no_repeat_ngram_size": 2000000000}`, `no_repeat_ngram_size (=2000000000) must be at most 16777216`},
	} {
		path := filepath.Join(dir, fmt.Sprintf("gc%d.json", i))
		require.NoError(t, os.WriteFile(path, []byte(c.json), 0o644))
		res := run(t, "", "-m", demoModel, "-p", "x", "--max-new-tokens", "2", "--generation-config", path)
		assert.NotEqual(t, 0, res.Code, c.json)
		assert.Contains(t, res.Stderr, c.msg, c.json)
		assert.Contains(t, res.Stderr, path, c.json)
		assert.NotContains(t, res.Stderr, "Go value", c.json)
		assert.NotContains(t, res.Stderr, "request 0", c.json)
	}
}

// A KV cache that cannot fit in the memory left is refused before llama.cpp
// allocates it, naming the option that sized it; llama.cpp used to commit
// 15.5 GB before failing with "ContextSize" or its allocator's words.
func TestKVCacheBoundedByMemory(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--ctx", "10000000"}, "--ctx 10000000: the context needs 15.4 GB of KV cache (f16 keys, f16 values, 1 layer), more than the "},
		{[]string{"--max-new-tokens", "10000000"}, "--max-new-tokens 10000000 (the cache holds the prompt and the new tokens; --ctx sets its size): the context needs"},
		{[]string{"--max-new-tokens", "4000000", "--num-beams", "4"}, "--max-new-tokens 4000000 (the cache holds the prompt and the new tokens; --ctx sets its size), for 4 sequences"},
	} {
		res := clitest.RunWithMemoryLimit(t, bin, 3<<20, append([]string{"--threads", "1", "-m", demoModel, "-p", "x"}, c.args...)...)
		assert.Equal(t, 2, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, c.msg)
		assert.Contains(t, res.Stderr, "of memory available now")
	}
	// A length from --generation-config is named as the file's field, and
	// held to the command line's bound.
	cfg := filepath.Join(t.TempDir(), "generation_config.json")
	require.NoError(t, os.WriteFile(cfg, []byte(`{"max_new_tokens": 2000000000}`), 0o644))
	res := run(t, "", "-m", demoModel, "-p", "x", "--generation-config", cfg)
	assert.Equal(t, 2, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, "max_new_tokens (=2000000000) must be at most 16777216 (set by --generation-config "+cfg+")")
}

// A model must be a regular file: a FIFO, a directory or a device is refused
// at once, without opening it (opening a FIFO would block).
func TestModelMustBeARegularFile(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for path, msg := range map[string]string{
		fifo:        "-m " + fifo + ": not a regular file (a named pipe)",
		t.TempDir(): "a directory, not a GGUF file",
		"/dev/null": "not a regular file (a character device)",
	} {
		res := run(t, "", "-m", path, "-p", "x")
		assert.Equal(t, 2, res.Code, res.Stderr)
		assert.Contains(t, res.Stderr, msg)
	}
}

// Ctrl-C ends llamagen at once, with the usual status, while it waits in
// the kernel for a FIFO's writer: the generation config, the prompts, the
// prompt file and the grammar may all be FIFOs (process substitution gives
// one), and each read used to swallow SIGINT until a writer came.
func TestCtrlCWhileReadingAFIFO(t *testing.T) {
	for _, option := range []string{"--generation-config", "--prompts", "-f", "--grammar"} {
		t.Run(option, func(t *testing.T) {
			fifo := filepath.Join(t.TempDir(), "input")
			require.NoError(t, syscall.Mkfifo(fifo, 0o600))
			args := []string{"--threads", "1", "-m", demoModel, option, fifo}
			if option == "--generation-config" || option == "--grammar" {
				args = append(args, "-p", "x")
			}
			code, stderr := clitest.InterruptWhileReading(t, fifo, bin, args...)
			assert.Equal(t, 130, code)
			assert.Equal(t, "llamagen: interrupted\n", stderr)
		})
	}
}

// Output that cannot be written is a failure: /dev/full fails every write
// (ENOSPC), and llamagen used to exit 0 after losing all of it. A closed
// pipe ends it quietly, as other Unix tools end (SIGPIPE, or 141).
func TestLostOutputFails(t *testing.T) {
	for _, extra := range [][]string{nil, {"--json"}, {"--num-beams", "2"}} {
		res := clitest.RunToDevFull(t, bin, append([]string{"--threads", "1", "-m", demoModel, "-p", "The model", "--max-new-tokens", "4"}, extra...)...)
		assert.Equal(t, 1, res.Code, "%q", extra)
		assert.Contains(t, res.Stderr, "llamagen: writing the output: write /dev/stdout: no space left on device", "%q", extra)
	}

	r, w, err := os.Pipe()
	require.NoError(t, err)
	r.Close()
	cmd := exec.Command(bin, "--threads", "1", "-m", demoModel, "-p", "The model", "--max-new-tokens", "4")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = w, &stderr
	err = cmd.Run()
	w.Close()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	status := exit.Sys().(syscall.WaitStatus)
	assert.True(t, status.Signaled() && status.Signal() == syscall.SIGPIPE || status.ExitStatus() == 141, "status %v", status)
	assert.Empty(t, stderr.String())
}

// More threads than CPUs is allowed with a warning in llamagen's voice,
// which --quiet hides; above ggml's 512 it is refused (see badInvocations).
func TestThreadsAboveTheCPUsWarn(t *testing.T) {
	n := strconv.Itoa(runtime.NumCPU() + 1)
	res := clitest.Run(t, bin, "", "--threads", n, "-m", demoModel, "-p", "The model", "--max-new-tokens", "2")
	require.Equal(t, 0, res.Code, res.Stderr)
	assert.Contains(t, res.Stderr, fmt.Sprintf("llamagen: warning: %s threads on %d CPUs", n, runtime.NumCPU()))
	quiet := clitest.Run(t, bin, "", "--threads", n, "-m", demoModel, "-p", "The model", "--max-new-tokens", "2", "--quiet")
	require.Equal(t, 0, quiet.Code, quiet.Stderr)
	assert.Empty(t, quiet.Stderr)
}

// A --max-time beyond what time.Duration holds (about 9.2e9 s) is no limit;
// it used to overflow into the past and end generation at once.
func TestHugeMaxTimeIsNoLimit(t *testing.T) {
	for _, seconds := range []string{"1e10", "1e300"} {
		res := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "6", "--max-time", seconds, "--json", "--quiet")
		require.Equal(t, 0, res.Code, res.Stderr)
		r := ofType(jsonLines(t, res.Stdout), "result")[0]
		assert.Equal(t, "length", r["finish"], seconds)
		assert.Len(t, r["tokens"], 6, seconds)

		beams := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "6", "--min-new-tokens", "6", "--num-beams", "2",
			"--max-time", seconds, "--json", "--quiet")
		require.Equal(t, 0, beams.Code, beams.Stderr)
		r = ofType(jsonLines(t, beams.Stdout), "result")[0]
		assert.Equal(t, "length", r["finish"], "beam search, %s", seconds)
		assert.Len(t, r["tokens"], 6, "beam search, %s", seconds)
	}
}

// Beam search honours --max-time, and returns the hypotheses it had when the
// time ran out. The time is the app's clock, checked after every step: one
// that moves 10 ms per reading (the first at the search's start) ends a
// search of --max-time 0.05 after its 5th step, whatever the machine's
// speed.
func TestMaxTimeBoundsBeamSearch(t *testing.T) {
	readings := 0
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, interrupts: make(chan os.Signal),
		now: func() time.Time {
			readings++
			return time.Unix(0, 0).Add(time.Duration(readings-1) * 10 * time.Millisecond)
		}}
	code := a.main([]string{"--threads", "1", "-m", tinyModel, "-p", "hello", "--num-beams", "2", "--max-new-tokens", "1900",
		"--min-new-tokens", "1900", "--max-time", "0.05", "--json", "--quiet"})
	require.Equal(t, 0, code, stderr.String())
	results := ofType(jsonLines(t, stdout.String()), "result")
	require.Len(t, results, 1)
	assert.Equal(t, "max_time", results[0]["finish"])
	assert.Len(t, results[0]["tokens"], 5, "the tokens of the 5 steps made")
	assert.Equal(t, 6, readings, "the start and one reading per step")
}

// A full context during beam search keeps the hypotheses found so far,
// printed with finish "context full"; it used to discard them all and fail.
func TestFullContextKeepsBeamHypotheses(t *testing.T) {
	res := run(t, "", "-m", demoModel, "-p", "The model", "--num-beams", "4", "--num-return-sequences", "2",
		"--max-new-tokens", "400", "--min-new-tokens", "400", "--ctx", "256", "--json")
	require.Equal(t, 0, res.Code, res.Stderr)
	results := ofType(jsonLines(t, res.Stdout), "result")
	require.Len(t, results, 2)
	for i, r := range results {
		assert.Equal(t, "context full", r["finish"])
		toks := ints(r["tokens"])
		assert.NotEmpty(t, toks)
		assert.InDelta(t, demoScore("The model", toks), r["score"].(float64), 1e-3)
		if i > 0 {
			assert.LessOrEqual(t, r["score"].(float64), results[i-1]["score"].(float64), "best first")
		}
	}
	assert.Contains(t, res.Stderr, "stopped early (context full): the hypotheses found so far; raise --ctx")
}

// --trim-leading-space gives transformers' decode of the new tokens: a
// SentencePiece tokenizer's decoder drops one leading space (its
// Strip(left=1) step), which the demo vocabulary's Detokenize models as
// llama_detokenize does; by default the first piece keeps it.
func TestTrimLeadingSpace(t *testing.T) {
	tokens, kept := greedy(t, "The model", 6)
	require.True(t, strings.HasPrefix(kept, " "), "the demo model's continuation starts with a space: %q", kept)
	want := demo.Spec.Vocab.Detokenize(tokens)
	require.Equal(t, strings.TrimPrefix(kept, " "), want)
	for _, extra := range [][]string{nil, {"--num-beams", "2"}} {
		res := run(t, "", append([]string{"-m", demoModel, "-p", "The model", "--max-new-tokens", "6", "--quiet", "--json", "--trim-leading-space"}, extra...)...)
		require.Equal(t, 0, res.Code, res.Stderr)
		r := ofType(jsonLines(t, res.Stdout), "result")[0]
		if extra == nil {
			assert.Equal(t, want, r["text"])
		} else {
			assert.False(t, strings.HasPrefix(r["text"].(string), " "), "beam search: %q", r["text"])
		}
	}
	plain := run(t, "", "-m", demoModel, "-p", "The model", "--max-new-tokens", "6", "--quiet", "--trim-leading-space")
	require.Equal(t, 0, plain.Code, plain.Stderr)
	assert.Equal(t, want+"\n", plain.Stdout)
}

// demoScore is the beam-search score of tokens after prompt on the demo
// model, from its exact log-probabilities: their sum over the length
// (length_penalty 1).
func demoScore(prompt string, tokens []int32) float64 {
	p := demo.Spec.Vocab.Tokenize(prompt, true)
	prev, sum := p[len(p)-1], 0.0
	for _, tok := range tokens {
		sum += demo.NextLogProbs(prev)[tok]
		prev = tok
	}
	return sum / float64(len(tokens))
}

// Ctrl-C during a beam search prints the hypotheses found so far, finish
// "cancelled", and exits 130; they used to be discarded. The progress bar,
// drawn on a terminal's stderr, shows when the search is under way.
func TestCtrlCKeepsBeamHypotheses(t *testing.T) {
	master, slave, err := clitest.OpenPTY()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer master.Close()
	cmd := exec.Command(bin, "--threads", "1", "-m", tinyModel, "-p", "hello", "--num-beams", "2", "--num-return-sequences", "2",
		"--max-new-tokens", "1900", "--min-new-tokens", "1900", "--json")
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, slave
	require.NoError(t, cmd.Start())
	defer cmd.Process.Kill()
	slave.Close()
	// Signalled once the terminal shows progress, not after a time: the
	// reader says when the line is drawn or the terminal closed.
	var term clitest.LockedBuffer
	progress, closed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 4096)
		shown := false
		for {
			n, err := master.Read(buf)
			term.Write(buf[:n])
			if !shown && strings.Contains(term.String(), "beam search (2 beams) [") {
				shown = true
				close(progress)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-progress:
	case <-closed:
		select {
		case <-progress:
		default:
			require.Fail(t, "no beam search progress", "%q", term.String())
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	assert.Equal(t, 130, exit.ExitCode())
	results := ofType(jsonLines(t, stdout.String()), "result")
	require.Len(t, results, 2)
	for _, r := range results {
		assert.Equal(t, "cancelled", r["finish"])
		n := len(r["tokens"].([]any))
		assert.Greater(t, n, 0)
		assert.Less(t, n, 1900)
	}
}

// A bad option of 120 KB gets a message of a line: the value is quoted
// cut to its start and its length.
func TestLongBadOptionQuotedShort(t *testing.T) {
	ids := strings.Repeat("99999,", 20_000) // an argument holds at most 128 KiB
	bias := "[[[" + ids[:len(ids)-1] + "],-1.0]]"
	res := run(t, "", "-m", demoModel, "-p", "x", "--sequence-bias", bias)
	assert.Equal(t, 2, res.Code)
	assert.Contains(t, res.Stderr, "--sequence-bias [[[99999,99999,")
	assert.Contains(t, res.Stderr, fmt.Sprintf("(%d bytes)", len(bias)))
	assert.Less(t, len(res.Stderr), 400, res.Stderr)
	// A value the option cannot read at all: the flag package's quote is
	// cut too.
	res = run(t, "", "-m", demoModel, "-p", "x", "--bad-words-ids", strings.Repeat("x", 100_000))
	assert.Equal(t, 2, res.Code)
	assert.Equal(t, `llamagen: --bad-words-ids "`+strings.Repeat("x", 64)+`"... (100000 bytes): not valid JSON (see llamagen --help)`+"\n", res.Stderr)
}
