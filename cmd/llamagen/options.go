package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/genconfig"
	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/internal/quote"
	"github.com/llamaloop/llamaloop/mirostat"
)

// defaultMaxNewTokens replaces transformers' max_length 20 when neither the
// command line nor --generation-config sets a length: 20 tokens is too
// short for a person reading the output.
const defaultMaxNewTokens = 128

// options is the parsed command line.
type options struct {
	model        string
	prompt       string
	promptFile   string
	promptsFile  string
	chat         bool
	system       string
	parseSpecial bool
	session      string
	template     string
	demo         bool
	echo         bool

	assistantModel string // --assistant-model: speculative decoding's draft model

	mmproj string      // --mmproj: the multimodal projector
	media  []mediaFile // --image and --audio, in command-line order

	genConfig string
	// overrides holds the generation-config fields set on the command line,
	// as JSON values by field name, applied with genconfig.Config.Update.
	overrides map[string]json.RawMessage

	mirostat    int
	mirostatTau float64
	mirostatEta float64
	seed        int64

	threads   int // 0 until resolved: not given
	gpuLayers int
	ctx       int
	parallel  int
	batch     int
	ubatch    int

	grammarFile string
	schemaFile  string
	anyJSON     bool

	trimLeadingSpace bool

	// readFile reads the files the options name (--generation-config,
	// --grammar, ...); nil means os.ReadFile. The command reads them so
	// that Ctrl-C stops a read that blocks (a FIFO without a writer).
	readFile func(path string) ([]byte, error)

	logprobs int
	json     bool
	quiet    bool
	version  bool
	help     bool
}

// valueKind says how a generation-config option's argument becomes JSON.
type valueKind int

const (
	kindInt     valueKind = iota
	kindFloat             // a number
	kindBool              // true/false; the flag alone means true
	kindIDs               // token ids: "5" or "5,7" or a JSON array
	kindJSON              // any JSON value, passed as it is
	kindEarly             // true, false or never
	kindStrings           // repeatable: each use adds a string
	kindPair              // "a,b" as a two-number array
	kindString            // a string
)

// configOption is a command-line option for one field of transformers'
// GenerationConfig.
type configOption struct {
	name, key string
	kind      valueKind
	def       string // transformers' default, shown by --help
	usage     string
}

// intMins are the least values of the integer options that size something
// (a cache, a batch, a table of n-grams); their largest are genconfig's
// bounds (genconfig.Bound), which Validate applies to the same fields from
// --generation-config. A value outside is refused on the command line,
// naming the option, before anything is allocated. Other integers (token
// ids) are checked against the model by genconfig.Validate.
var intMins = map[string]int64{
	"max-new-tokens":               1,
	"max-length":                   1,
	"min-new-tokens":               0,
	"min-length":                   0,
	"num-beams":                    1,
	"num-return-sequences":         1,
	"top-k":                        0,
	"no-repeat-ngram-size":         0,
	"encoder-no-repeat-ngram-size": 0,
	"prompt-lookup":                0,
	"max-matching-ngram-size":      0,
	"num-assistant-tokens":         0,
}

const (
	// maxSequences is llama.cpp's LLAMA_MAX_SEQ, the most sequences (beams,
	// rows decoded together) a context holds; llamacpp.MaxSequences reports
	// it at run time, and the commands check against that too.
	maxSequences = 256
	// maxSeconds bounds --max-time: a time.Duration holds about 292 years
	// (9.2e9 s), and a longer limit is no limit.
	maxSeconds = float64(math.MaxInt64) / float64(time.Second)
)

// configOptions lists every genconfig.Config field that package logits
// and the decoding loop act on, with transformers' defaults.
var configOptions = []configOption{
	{"max-new-tokens", "max_new_tokens", kindInt, strconv.Itoa(defaultMaxNewTokens), "the most `N` tokens to generate per sequence, 1 to 16777216 (llamagen's default applies when neither --max-length nor the generation config sets a length)"},
	{"max-length", "max_length", kindInt, "20", "the most tokens of prompt plus generation (`N`); --max-new-tokens wins over it"},
	{"min-new-tokens", "min_new_tokens", kindInt, "none", "end-of-sequence tokens are banned until `N` tokens are generated"},
	{"min-length", "min_length", kindInt, "0", "end-of-sequence tokens are banned until prompt plus generation reach `N` tokens"},
	{"max-time", "max_time", kindFloat, "none", "stop generating after `SECONDS` (more than 0; beam search checks it after each step, at least one, as transformers does, then prints the hypotheses found so far)"},
	{"stop-strings", "stop_strings", kindStrings, "none", "stop a sequence once its generated text contains `STRING` (repeatable)"},
	{"do-sample", "do_sample", kindBool, "false", "sample the next token from the processed distribution instead of taking the most probable one"},
	{"num-beams", "num_beams", kindInt, "1", "beam search with `N` beams when N > 1 (at most 256)"},
	{"num-return-sequences", "num_return_sequences", kindInt, "1", "sequences to return per prompt (`N`): the best N beams, or N samples with seeds seed, seed+1, ..."},
	{"early-stopping", "early_stopping", kindEarly, "false", "beam search stopping rule `WHEN`: true, false or never"},
	{"length-penalty", "length_penalty", kindFloat, "1.0", "beam search: scores are divided by length^`X`"},
	{"temperature", "temperature", kindFloat, "1.0", "sampling: divide the logits by `T`"},
	{"top-k", "top_k", kindInt, "50", "sampling: keep the `K` most probable tokens (0 keeps all)"},
	{"top-p", "top_p", kindFloat, "1.0", "sampling: keep the most probable tokens whose probabilities sum to `P`"},
	{"min-p", "min_p", kindFloat, "none", "sampling: drop tokens less probable than `P` times the most probable one"},
	{"typical-p", "typical_p", kindFloat, "1.0", "sampling: locally typical sampling with mass `P`"},
	{"epsilon-cutoff", "epsilon_cutoff", kindFloat, "0", "sampling: drop tokens of probability below `E`"},
	{"eta-cutoff", "eta_cutoff", kindFloat, "0", "sampling: eta sampling with `E`"},
	{"repetition-penalty", "repetition_penalty", kindFloat, "1.0", "divide the scores of tokens already present by `X` (multiply negative ones)"},
	{"encoder-repetition-penalty", "encoder_repetition_penalty", kindFloat, "1.0", "favour tokens of the prompt by `X`"},
	{"no-repeat-ngram-size", "no_repeat_ngram_size", kindInt, "0", "ban every n-gram of size `N` that already occurred"},
	{"encoder-no-repeat-ngram-size", "encoder_no_repeat_ngram_size", kindInt, "0", "ban n-grams of size `N` of the prompt"},
	{"bad-words-ids", "bad_words_ids", kindJSON, "none", "token sequences never to generate, as `JSON` such as [[12],[7,9]]"},
	{"sequence-bias", "sequence_bias", kindJSON, "none", "biases of token sequences, as `JSON` such as [[[12,7],-2.0]]"},
	{"suppress-tokens", "suppress_tokens", kindIDs, "none", "token `IDS` never to generate (comma-separated)"},
	{"begin-suppress-tokens", "begin_suppress_tokens", kindIDs, "none", "token `IDS` not to generate first"},
	{"forced-bos-token-id", "forced_bos_token_id", kindInt, "none", "force token `ID` as the first generated token"},
	{"forced-eos-token-id", "forced_eos_token_id", kindIDs, "none", "force token `IDS` at the last position"},
	{"exponential-decay-length-penalty", "exponential_decay_length_penalty", kindPair, "none", "raise end-of-sequence scores from token `START,FACTOR` on"},
	{"remove-invalid-values", "remove_invalid_values", kindBool, "false", "replace NaN and infinite scores"},
	{"renormalize-logits", "renormalize_logits", kindBool, "false", "log-softmax the scores after every processor"},
	{"eos-token-id", "eos_token_id", kindIDs, "the model's end-of-generation tokens", "token `IDS` that end a sequence"},
	{"pad-token-id", "pad_token_id", kindInt, "none", "padding token `ID`"},
	{"bos-token-id", "bos_token_id", kindInt, "none", "beginning-of-sequence token `ID`"},
	{"prompt-lookup", "prompt_lookup_num_tokens", kindInt, "none", "speculative decoding: propose `N` tokens per step copied from the text so far (prompt lookup)"},
	{"max-matching-ngram-size", "max_matching_ngram_size", kindInt, "2", "prompt lookup: match the last `N` tokens at most"},
	{"num-assistant-tokens", "num_assistant_tokens", kindInt, "20", "--assistant-model: the draft model proposes `N` tokens per step"},
	{"num-assistant-tokens-schedule", "num_assistant_tokens_schedule", kindString, "constant", "--assistant-model: `SCHEDULE` constant, heuristic or heuristic_transient"},
	{"assistant-confidence-threshold", "assistant_confidence_threshold", kindFloat, "0.4", "--assistant-model: stop drafting after a token of draft probability below `P`"},
}

// configValue is the flag.Value of one generation-config option: Set
// stores the argument as JSON in the options' overrides.
type configValue struct {
	opt *configOption
	o   *options
}

func (v configValue) String() string {
	if v.opt == nil {
		return ""
	}
	return v.opt.def
}

func (v configValue) IsBoolFlag() bool { return v.opt.kind == kindBool }

func (v configValue) Set(s string) error {
	raw, err := v.opt.toJSON(s, v.o.overrides[v.opt.key])
	if err != nil {
		return err
	}
	v.o.overrides[v.opt.key] = raw
	return nil
}

// toJSON converts a command-line argument into the JSON of its field;
// prev is the value so far (repeatable options add to it).
func (c *configOption) toJSON(arg string, prev json.RawMessage) (json.RawMessage, error) {
	s := strings.TrimSpace(arg) // a stop string keeps its spaces

	switch c.kind {
	case kindInt:
		n, err := strconv.ParseInt(s, 10, 64)
		lo, hi := int64(math.MinInt32), int64(math.MaxInt32)
		if m, ok := intMins[c.name]; ok {
			lo = m
		}
		if m, ok := genconfig.Bound(c.key); ok {
			hi = int64(m)
		}
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("not an integer")
		case err != nil || n < lo || n > hi:
			return nil, fmt.Errorf("must be from %d to %d", lo, hi)
		}
		return json.Marshal(n)
	case kindFloat:
		f, err := strconv.ParseFloat(s, 64)
		switch {
		case err != nil && !errors.Is(err, strconv.ErrRange):
			return nil, fmt.Errorf("not a number")
		case math.IsNaN(f) || math.IsInf(f, 0):
			// JSON has no NaN or infinity, and no field takes one.
			return nil, fmt.Errorf("not a finite number")
		case c.key == "max_time" && !(f > 0):
			return nil, fmt.Errorf("must be more than 0 seconds")
		}
		return json.Marshal(f)
	case kindBool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, fmt.Errorf("not true or false")
		}
		return json.Marshal(b)
	case kindEarly:
		switch s {
		case "true", "false":
			return json.RawMessage(s), nil
		case "never":
			return json.RawMessage(`"never"`), nil
		}
		return nil, fmt.Errorf("not true, false or never")
	case kindIDs:
		if strings.HasPrefix(s, "[") {
			var ids []int32
			if err := json.Unmarshal([]byte(s), &ids); err != nil {
				return nil, fmt.Errorf("not a list of token ids")
			}
			return json.Marshal(ids)
		}
		var ids []int32
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
			if err != nil {
				return nil, fmt.Errorf("not a list of token ids")
			}
			ids = append(ids, int32(n))
		}
		return json.Marshal(ids)
	case kindString:
		return json.Marshal(s)
	case kindPair:
		parts := strings.Split(s, ",")
		if len(parts) != 2 {
			return nil, fmt.Errorf("not START,FACTOR")
		}
		var pair [2]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
			if err != nil {
				return nil, fmt.Errorf("not START,FACTOR")
			}
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return nil, fmt.Errorf("START and FACTOR must be finite numbers")
			}
			pair[i] = f
		}
		return json.Marshal(pair)
	case kindStrings:
		if arg == "" {
			return nil, fmt.Errorf("a stop string cannot be empty")
		}
		var list []string
		if prev != nil {
			if err := json.Unmarshal(prev, &list); err != nil {
				return nil, err
			}
		}
		return json.Marshal(append(list, arg))
	}
	if !json.Valid([]byte(s)) {
		return nil, fmt.Errorf("not valid JSON")
	}
	return json.RawMessage(s), nil
}

// usageGroups orders the help.
var usageGroups = func() []cli.Group {
	var gen []string
	for _, c := range configOptions {
		gen = append(gen, c.name)
	}
	return []cli.Group{
		{Title: "Input", Flags: []string{"m,model", "p,prompt", "f,file", "prompts", "chat", "system", "session", "chat-template", "parse-special", "demo", "echo"}},
		{Title: "Decoding (the fields of transformers' GenerationConfig; command-line values override --generation-config)",
			Flags: append([]string{"generation-config"}, gen...)},
		{Title: "Mirostat and randomness", Flags: []string{"mirostat", "mirostat-tau", "mirostat-eta", "seed"}},
		{Title: "Constrained output", Flags: []string{"grammar", "json-schema", "any-json"}},
		{Title: "Images and audio", Flags: []string{"mmproj", "image", "audio"}},
		{Title: "Speculative decoding (with --prompt-lookup, --num-assistant-tokens and the other fields above)", Flags: []string{"assistant-model"}},
		{Title: "Runtime", Flags: []string{"threads", "gpu-layers", "ctx", "parallel", "batch", "ubatch"}},
		{Title: "Output", Flags: []string{"logprobs", "trim-leading-space", "json", "quiet", "version", "h,help"}},
	}
}()

const usageHead = `llamagen generates text with a GGUF model through llama.cpp and llamaloop.

Usage:
  llamagen -m MODEL.gguf -p "prompt" [options]     stream the continuation of a prompt
  llamagen -m MODEL.gguf -f prompt.txt [options]   read the prompt from a file (- for stdin)
  llamagen -m MODEL.gguf --prompts FILE [options]  one prompt per line (or JSON lines), one batch
  llamagen -m MODEL.gguf --chat [options]          chat, reading turns from stdin
  llamagen -m MODEL.gguf --demo                    greedy, sampling, Mirostat and beam search side by side

Text goes to stdout; the loading progress bar (on a terminal), warnings, the
summary line and errors go to stderr. Ctrl-C stops generation and keeps what
was printed (exit status 130); a beam search cut short by Ctrl-C, --max-time or
a full context prints the hypotheses found so far. A sequence that fills
its context stops with exit status 0, as at the length limit, and a line on
stderr that says so (unless --quiet; --json says "context full"). Exit
status 2 is a bad option (the message names it and its range), 1 an error,
including output that could not be written; a closed pipe ends llamagen
quietly. Decoding
follows transformers' generate(): without --do-sample, --num-beams or
--mirostat it is greedy.

--json writes one JSON object per line to stdout:
  {"type":"token","row":R,"token":ID,"text":"...","logprob":L,"top":[{"token":ID,"text":"...","logprob":L}]}
      for every generated token: text is the new text (a character split across tokens comes
      with its last byte; control tokens have none), logprob and top come with --logprobs;
      there are none under beam search, which cannot stream;
  {"type":"text","row":R,"text":"..."}
      before a result, when the output ended in the middle of a character: its last bytes, so
      that the texts of a row's token and text objects join up to its result's text (each byte
      that is not part of a character is one U+FFFD, in both);
  {"type":"result","row":R,"sequence":S,"prompt":"...","prompt_tokens":N,"text":"...","tokens":[...],
   "finish":"eos|stop|length|max_time|cancelled|context full|error","stop_string":"...","score":X,
   "method":"...","error":"..."}
      when a sequence ends (score: beam search; method: --demo; empty fields are left out).
`

// newFlagSet defines every option on o.
func newFlagSet(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("llamagen", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.overrides = map[string]json.RawMessage{}
	str := func(p *string, names, def, usage string) {
		for _, n := range strings.Split(names, ",") {
			fs.StringVar(p, n, def, usage)
		}
	}
	str(&o.model, "m,model", "", "the GGUF model `FILE` (required)")
	str(&o.prompt, "p,prompt", "", "the prompt `TEXT`")
	str(&o.promptFile, "f,file", "", "read the prompt from `FILE` (- for stdin)")
	fs.StringVar(&o.promptsFile, "prompts", "", "generate for every prompt of `FILE` as one batch: one prompt per line, or JSON lines (a string, or {\"prompt\":\"...\"} or {\"messages\":[{\"role\":\"user\",\"content\":\"...\"}]})")
	fs.BoolVar(&o.chat, "chat", false, "apply the model's chat template; without a prompt, read user turns from stdin (interactively on a terminal)")
	fs.StringVar(&o.system, "system", "", "system message `TEXT` for --chat")
	fs.BoolVar(&o.parseSpecial, "parse-special", false, "read the text of control tokens (such as <|im_end|>) in the prompt and in chat messages as those tokens; by default it stays text, and only the chat template's own markers are control tokens, so that a message cannot open a turn of another role")
	fs.StringVar(&o.session, "session", "", "keep the --chat conversation and its evaluated state in `FILE`: resumed at start when it exists, saved after each turn")
	fs.StringVar(&o.template, "chat-template", "", "chat template `NAME` or text replacing the model's (e.g. chatml, llama3)")
	fs.StringVar(&o.mmproj, "mmproj", "", "the multimodal projector `FILE` (a GGUF mmproj beside the model: llama.cpp's mtmd) that --image and --audio need")
	fs.Func("image", "an image `FILE` (PNG, JPEG or GIF) for the prompt, at its next "+mediaMarker+" or appended; repeatable", func(v string) error {
		o.media = append(o.media, mediaFile{audio: false, path: v})
		return nil
	})
	fs.Func("audio", "a sound `FILE` (WAV: 16-bit PCM or 32-bit float, mono or stereo, at the projector's sample rate) for the prompt, at its next "+mediaMarker+" or appended; repeatable", func(v string) error {
		o.media = append(o.media, mediaFile{audio: true, path: v})
		return nil
	})
	fs.StringVar(&o.assistantModel, "assistant-model", "", "speculative decoding: the draft model `FILE` (GGUF, the same vocabulary) proposes tokens that the model verifies")
	fs.BoolVar(&o.demo, "demo", false, "run greedy, sampling, Mirostat, beam search and speculative decoding on the same prompt (default prompt \"The model\", 40 new tokens)")
	fs.BoolVar(&o.echo, "echo", false, "print the prompt before its continuation")
	fs.StringVar(&o.genConfig, "generation-config", "", "read decoding settings from a transformers generation_config.json `FILE`")
	for i := range configOptions {
		c := &configOptions[i]
		fs.Var(configValue{c, o}, c.name, c.usage)
	}
	fs.IntVar(&o.mirostat, "mirostat", 0, "choose tokens with Mirostat `VERSION` 1 or 2 (0: off)")
	fs.Float64Var(&o.mirostatTau, "mirostat-tau", 5.0, "Mirostat target surprise `BITS`")
	fs.Float64Var(&o.mirostatEta, "mirostat-eta", 0.1, "Mirostat learning `RATE`")
	fs.Int64Var(&o.seed, "seed", -1, "random `SEED` for sampling and Mirostat (-1: a random one, printed in the summary)")
	fs.IntVar(&o.threads, "threads", 0, "CPU `THREADS`, 1 to 512; more than the CPUs available, or than the load average leaves free, is allowed with a warning (ggml's threads then wait for each other and every step slows down sharply)")
	fs.Lookup("threads").DefValue = cli.ThreadsDefault
	fs.IntVar(&o.gpuLayers, "gpu-layers", -1, "layers to offload to a GPU (`N`, -1: all); ignored without a GPU backend")
	fs.IntVar(&o.ctx, "ctx", 0, "KV cache cells per sequence (`N`, at most 16777216, rounded up to a multiple of 256; 0: just enough for the longest prompt and --max-new-tokens, 4096 for --chat); the cache must fit in the memory available; a sequence that fills it stops there, with a line on stderr")
	fs.IntVar(&o.parallel, "parallel", 8, "sequences decoded together (`N`, 1 to 256) with --prompts or --num-return-sequences")
	fs.IntVar(&o.batch, "batch", 512, "the most tokens of one llama_decode (`N`, 1 to 1048576; llama.cpp's n_batch)")
	fs.IntVar(&o.ubatch, "ubatch", 0, "the most tokens llama.cpp computes at once (`N`, 1 to --batch; llama.cpp's n_ubatch)")
	fs.Lookup("ubatch").DefValue = "--batch"
	fs.StringVar(&o.grammarFile, "grammar", "", "constrain the output to the GBNF grammar in `FILE` (llama.cpp's format), or to the grammar given as text (an argument containing ::=, as llama.cpp's --grammar)")
	fs.StringVar(&o.schemaFile, "json-schema", "", "constrain the output to JSON valid under the JSON Schema in `FILE`, or given as text (an argument starting with {, as llama.cpp's --json-schema)")
	fs.BoolVar(&o.anyJSON, "any-json", false, "constrain the output to one JSON value (--json is the output format)")
	fs.IntVar(&o.logprobs, "logprobs", 0, "print each token's log-probability and the `N` most probable tokens (0: off)")
	fs.BoolVar(&o.trimLeadingSpace, "trim-leading-space", false, "drop one space from the start of the generated text, as transformers' tokenizer.decode of the new tokens does for SentencePiece vocabularies (Llama 2, Mistral, Gemma); by default the text is llama.cpp's pieces, whose first space separates the continuation from the prompt")
	fs.BoolVar(&o.json, "json", false, "write JSON lines to stdout (see above)")
	fs.BoolVar(&o.quiet, "quiet", false, "no summary line and no warnings on stderr")
	cli.CommonFlags(fs, &o.version, &o.help)
	fs.Usage = func() {} // the flag package calls it on every parse error
	return fs
}

// parseArgs parses the command line. A request for help returns
// flag.ErrHelp after printing it to out.
func parseArgs(args []string, out io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o, out)
	args, err := cli.TranslateLlamaFlags(cli.Llamagen, fs, args)
	if err != nil {
		return nil, err
	}
	if err := cli.Parse(fs, args, &o.help, out, usageHead, usageGroups); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(out, cli.LlamaFlagsHelp(cli.Llamagen))
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, cli.Usagef("unexpected argument %s (quote the prompt: -p \"...\")", quote.String(fs.Arg(0)))
	}
	if err := cli.ThreadsGiven(fs); err != nil {
		return nil, err
	}
	return o, o.check()
}

// check rejects combinations that cannot work, before the model loads.
func (o *options) check() error {
	sources := 0
	for _, s := range []string{o.prompt, o.promptFile, o.promptsFile} {
		if s != "" {
			sources++
		}
	}
	constraints := 0
	for _, set := range []bool{o.grammarFile != "", o.schemaFile != "", o.anyJSON} {
		if set {
			constraints++
		}
	}
	switch {
	case constraints > 1 && !o.version && !o.help:
		return cli.Usagef("--grammar, --json-schema and --any-json exclude each other")
	case constraints > 0 && o.demo:
		return cli.Usagef("--demo runs fixed settings: it takes no --grammar, --json-schema or --any-json")
	case o.version:
		return nil
	case o.model == "":
		return cli.Usagef("no model: give one with -m FILE.gguf")
	case sources > 1:
		return cli.Usagef("give only one of -p, -f and --prompts")
	case o.demo && (o.promptFile != "" || o.promptsFile != "" || o.chat):
		return cli.Usagef("--demo takes only -p")
	case sources == 0 && !o.chat && !o.demo:
		return cli.Usagef("no prompt: give -p TEXT, -f FILE, --prompts FILE, --chat or --demo")
	case o.mirostat < 0 || o.mirostat > 2:
		return cli.Usagef("--mirostat %d: must be 0 (off), 1 or 2", o.mirostat)
	case o.seed < -1:
		return cli.Usagef("--seed %d: must be -1 (a random seed) or from 0 up", o.seed)
	case o.gpuLayers < -1:
		return cli.Usagef("--gpu-layers %d: must be -1 (all) or from 0 up", o.gpuLayers)
	case o.ctx < 0 || o.ctx > cli.MaxCells:
		return cli.Usagef("--ctx %d: must be from 1 to %d cells (or 0 for automatic)", o.ctx, cli.MaxCells)
	case o.parallel < 1 || o.parallel > maxSequences:
		return cli.Usagef("--parallel %d: must be from 1 to %d (llama.cpp's most sequences)", o.parallel, maxSequences)
	case o.batch < 1 || o.batch > 1<<20:
		return cli.Usagef("--batch %d: must be from 1 to %d", o.batch, 1<<20)
	case o.ubatch < 0 || o.ubatch > o.batch:
		return cli.Usagef("--ubatch %d: must be from 1 to --batch (%d)", o.ubatch, o.batch)
	case o.logprobs < 0:
		return cli.Usagef("--logprobs %d: must be 0 (off) or more", o.logprobs)
	case o.system != "" && !o.chat:
		return cli.Usagef("--system needs --chat")
	case o.session != "" && (!o.chat || sources > 0):
		return cli.Usagef("--session needs --chat without a prompt")
	case len(o.media) > 0 && o.mmproj == "":
		return cli.Usagef("--image and --audio need --mmproj FILE (the model's multimodal projector)")
	case o.mmproj != "" && len(o.media) == 0:
		return cli.Usagef("--mmproj needs --image or --audio")
	case len(o.media) > maxMedia:
		return cli.Usagef("%d --image and --audio files: at most %d", len(o.media), maxMedia)
	case len(o.media) > 0 && (o.chat || o.promptsFile != "" || o.demo):
		return cli.Usagef("--image and --audio take one prompt (-p or -f), not --chat, --prompts or --demo")
	case len(o.media) > 0 && o.assistantModel != "":
		return cli.Usagef("--image and --audio with --assistant-model: the draft model cannot read the prompt's image or sound embeddings (prompt lookup speculates with them)")
	}
	if o.mirostat != 0 {
		switch {
		case !(o.mirostatTau > 0) || math.IsInf(o.mirostatTau, 0):
			return cli.Usagef("--mirostat-tau %g: must be a finite number of bits above 0", o.mirostatTau)
		case !(o.mirostatEta >= 0) || math.IsInf(o.mirostatEta, 0):
			return cli.Usagef("--mirostat-eta %g: must be a finite rate of 0 or more", o.mirostatEta)
		}
		if err := o.mirostatConfig().Validate(); err != nil {
			return cli.Usagef("--mirostat-tau %g, --mirostat-eta %g: %v", o.mirostatTau, o.mirostatEta, err)
		}
	}
	return nil
}

// mirostatConfig is the Mirostat configuration the options ask for.
func (o *options) mirostatConfig() *mirostat.Config {
	return &mirostat.Config{Version: mirostat.Version(o.mirostat), Tau: o.mirostatTau, Eta: o.mirostatEta}
}

// generationConfig builds the decoding configuration: transformers'
// defaults or --generation-config, then llamagen's default length when
// nothing sets one, then the command-line fields. Validate's warnings are
// returned for stderr; its errors are the error.
func (o *options) generationConfig(vocabSize int) (*genconfig.Config, []string, error) {
	cfg := genconfig.Default()
	fileKeys := map[string]json.RawMessage{}
	if o.genConfig != "" {
		data, err := o.read(o.genConfig)
		if err != nil {
			return nil, nil, fmt.Errorf("--generation-config: %w", err)
		}
		if cfg, err = genconfig.Parse(data); err != nil {
			return nil, nil, fmt.Errorf("--generation-config %s: %w", o.genConfig, err)
		}
		_ = json.Unmarshal(data, &fileKeys)
	}
	if !setsLength(fileKeys) && !setsLength(o.overrides) {
		n := defaultMaxNewTokens
		cfg.MaxNewTokens = &n
	}
	if len(o.overrides) > 0 {
		data, err := json.Marshal(o.overrides)
		if err != nil {
			return nil, nil, err
		}
		if err := cfg.Update(data); err != nil {
			return nil, nil, cli.Usagef("%w", o.settingsError(err))
		}
	}
	check := cfg
	if o.mirostat != 0 && cfg.NumBeams <= 1 && cfg.NumReturnSequences > 1 {
		// Mirostat samples, so several sequences per prompt make sense;
		// transformers' rule only knows do_sample.
		check = cfg.Clone()
		check.NumReturnSequences = 1
	}
	warnings, err := check.Validate(vocabSize)
	if err == nil {
		err = commandLimits(cfg)
	}
	if err != nil {
		return nil, nil, cli.Usagef("invalid generation settings: %w", o.settingsError(err))
	}
	return cfg, warnings, nil
}

// commandLimits rejects what transformers accepts but llamagen cannot do
// as asked, whether the options or --generation-config set it: a max_time
// of 0 or less (transformers then stops after the first token; a user who
// wrote it meant something else), and an empty stop string (which would
// end every sequence before its first token).
func commandLimits(cfg *genconfig.Config) error {
	var errs []error
	if t := cfg.MaxTime; t != nil && !(*t > 0) {
		errs = append(errs, &genconfig.FieldError{Field: "MaxTime", JSON: "max_time", Value: *t, Reason: "must be more than 0 seconds"})
	}
	for _, s := range cfg.StopStrings {
		if s == "" {
			errs = append(errs, &genconfig.FieldError{Field: "StopStrings", JSON: "stop_strings", Value: `""`, Reason: "must not be empty"})
			break
		}
	}
	return errors.Join(errs...)
}

// read reads a file named by an option.
func (o *options) read(path string) ([]byte, error) {
	if o.readFile != nil {
		return o.readFile(path)
	}
	return os.ReadFile(path)
}

// settingsError is an error of the generation config told in the terms of the command line: each
// field that the config rejects is named by the option that set it ("--temperature -1: ..."), or
// said to come from --generation-config, on one line. It wraps the config's error, so that its
// *genconfig.FieldErrors stay reachable with errors.As.
func (o *options) settingsError(err error) error {
	fes := genconfig.FieldErrors(err)
	if len(fes) == 0 {
		return err
	}
	msgs := make([]string, len(fes))
	for i, fe := range fes {
		msgs[i] = o.fieldMessage(fe)
	}
	return &settingsError{msg: strings.Join(msgs, "; "), err: err}
}

// fieldMessage names what set the rejected field fe: the option and its value, or the
// --generation-config file.
func (o *options) fieldMessage(fe *genconfig.FieldError) string {
	what := strings.TrimPrefix(fe.Error(), "genconfig: ")
	if raw, ok := o.overrides[fe.JSON]; ok {
		if opt := configOptionFor(fe.JSON); opt != nil {
			return fmt.Sprintf("--%s %s: %s", opt.name, quote.Value(optionArg(raw)), what)
		}
	}
	if o.genConfig != "" {
		return fmt.Sprintf("%s (set by --generation-config %s)", what, o.genConfig)
	}
	return what
}

// settingsError keeps the config's error behind the command line's message.
type settingsError struct {
	msg string
	err error
}

// Error returns the command line's message.
func (e *settingsError) Error() string { return e.msg }

// Unwrap returns the config's error.
func (e *settingsError) Unwrap() error { return e.err }

// configOptionFor returns the option of the generation_config.json field key, or nil when no
// option sets it.
func configOptionFor(key string) *configOption {
	for i := range configOptions {
		if configOptions[i].key == key {
			return &configOptions[i]
		}
	}
	return nil
}

// optionArg shows an option's value as the command line spells it: a JSON string without its
// quotes, anything else as its JSON.
func optionArg(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

func setsLength(fields map[string]json.RawMessage) bool {
	for _, k := range []string{"max_new_tokens", "max_length"} {
		if v, ok := fields[k]; ok && string(v) != "null" {
			return true
		}
	}
	return false
}
