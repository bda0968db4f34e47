package cli

import (
	"flag"
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
)

// Command names a command in the table of llama.cpp's options.
type Command int

// The commands that take llama.cpp's options.
const (
	Llamagen Command = iota
	Llamaserve
)

func (c Command) String() string {
	if c == Llamaserve {
		return "llamaserve"
	}
	return "llamagen"
}

// A llamaFlag is one option of llama.cpp's common/arg.cpp (all its
// spellings) and what each command makes of it.
type llamaFlag struct {
	names string // llama.cpp's spellings, comma-separated
	value bool   // it takes a value
	gen   use
	serve use
}

// use is what a command makes of a llama.cpp option: our option of the
// same meaning (to), a conversion when the meanings meet only for some
// values (conv), or a refusal with a hint saying what to do instead.
// A zero use says the option has no counterpart.
type use struct {
	to   string
	conv func(v string, t *translation) ([]string, error)
	hint string
}

func to(name string) use                                      { return use{to: name} }
func hint(text string) use                                    { return use{hint: text} }
func conv(f func(string, *translation) ([]string, error)) use { return use{conv: f} }

// noop accepts a llama.cpp switch for what the command always does.
var noop = conv(func(string, *translation) ([]string, error) { return nil, nil })

const (
	serveSampling = "llamaserve takes sampling settings per request (temperature, top_p, top_k, min_p, repetition_penalty, mirostat, ...) or from --generation-config FILE"
	serveNoPrompt = "llamaserve takes its prompts in requests"
	genNoServer   = "llamagen does not serve: llamaserve does"
	genFull       = "llamagen shifts no context: it stops when the context is full (with a notice); --ctx sets its size"
	serveFull     = "llamaserve shifts no context: a reply stops when its sequence is full (finish_reason \"length\"); --ctx sets the size"
)

// llamaFlags is the one table of llama.cpp's options that llamagen and
// llamaserve take in llama.cpp's spelling. A spelling that is a command's
// own option (-m, --model, -p, --threads, --seed, --gpu-layers, --top-k,
// --mirostat, --chat-template, --grammar, --json-schema; llamaserve's
// --parallel, --api-key, --alias, --pooling) is the command's, whatever the
// table says: those mean the same as llama.cpp's, but for llamagen's
// --parallel (the sequences decoded together, as llama-parallel's; the
// table refuses llama-batched's -np). See README's "llama.cpp's options".
// An option of llama.cpp not listed here is refused as having no
// counterpart (llamaCppNames).
var llamaFlags = []llamaFlag{
	{names: "-n,--predict,--n-predict", value: true, gen: conv(nPredict),
		serve: hint("llamaserve takes the length per request (max_tokens) or from --generation-config's max_new_tokens")},
	{names: "-c,--ctx-size", value: true, gen: conv(genCtxSize), serve: conv(serveCtxSize)},
	{names: "-t,--threads", value: true, gen: conv(threads), serve: conv(threads)},
	{names: "-tb,--threads-batch", value: true,
		gen: hint("--threads sets the threads of single tokens and of batches"), serve: hint("--threads sets the threads of single tokens and of batches")},
	{names: "-ngl,--gpu-layers,--n-gpu-layers", value: true, gen: to("gpu-layers"), serve: to("gpu-layers")},
	{names: "-s,--seed", value: true, gen: conv(seed), serve: hint(serveSampling)},
	{names: "-b,--batch-size", value: true, gen: to("batch"), serve: to("batch")},
	{names: "-ub,--ubatch-size", value: true, gen: to("ubatch"), serve: to("ubatch")},
	{names: "-np,--parallel", value: true,
		gen: hint("llama.cpp's -np is the sequences per prompt in llama-batched and the clients in llama-parallel: " +
			"give --num-return-sequences N (with --do-sample) for N continuations of a prompt, or --parallel N for how many sequences llamagen decodes together"),
		serve: conv(serveParallel)},
	{names: "-p,--prompt", value: true, gen: to("prompt"), serve: hint(serveNoPrompt)},
	{names: "-f,--file", value: true, gen: to("file"), serve: hint(serveNoPrompt)},
	{names: "-m,--model", value: true, gen: to("model"), serve: to("model")},
	{names: "--temp", value: true, gen: conv(temp), serve: hint(serveSampling)},
	{names: "--top-k", value: true, gen: to("top-k"), serve: hint(serveSampling)},
	{names: "--top-p", value: true, gen: to("top-p"), serve: hint(serveSampling)},
	{names: "--min-p", value: true, gen: to("min-p"), serve: hint(serveSampling)},
	{names: "--typical", value: true, gen: to("typical-p"), serve: hint(serveSampling)},
	{names: "--repeat-penalty", value: true, gen: conv(repeatPenalty), serve: hint(serveSampling)},
	{names: "--repeat-last-n", value: true, gen: conv(repeatLastN), serve: hint(serveSampling)},
	{names: "--presence-penalty", value: true,
		gen:   hint("transformers' GenerationConfig has no presence penalty: --repetition-penalty X divides the scores of the tokens already present"),
		serve: hint("requests take presence_penalty")},
	{names: "--frequency-penalty", value: true,
		gen:   hint("transformers' GenerationConfig has no frequency penalty: --repetition-penalty X divides the scores of the tokens already present"),
		serve: hint("requests take frequency_penalty")},
	{names: "--mirostat", value: true, gen: to("mirostat"), serve: hint(serveSampling)},
	{names: "--mirostat-ent", value: true, gen: to("mirostat-tau"), serve: hint(serveSampling)},
	{names: "--mirostat-lr", value: true, gen: to("mirostat-eta"), serve: hint(serveSampling)},
	{names: "--grammar-file", value: true, gen: to("grammar"), serve: hint("requests take a grammar or a response_format")},
	{names: "--grammar", value: true,
		gen:   to("grammar"),
		serve: hint("requests take a grammar or a response_format")},
	{names: "-j,--json-schema", value: true, gen: to("json-schema"), serve: hint("requests take response_format {\"type\":\"json_schema\",...}")},
	{names: "-jf,--json-schema-file", value: true, gen: to("json-schema"), serve: hint("requests take response_format {\"type\":\"json_schema\",...}")},
	{names: "--port", value: true, gen: hint(genNoServer), serve: conv(port)},
	{names: "--host", value: true, gen: hint(genNoServer), serve: conv(host)},
	{names: "--api-key", value: true, gen: hint(genNoServer), serve: to("api-key")},
	{names: "--api-key-file", value: true, gen: hint(genNoServer),
		serve: hint("give the key in $LLAMASERVE_API_KEY (kept out of the process list) or with --api-key KEY")},
	{names: "--jinja",
		gen:   hint("llamagen formats chats with llama.cpp's built-in templates (--chat-template NAME); llamaserve renders the model's Jinja template"),
		serve: noop},
	{names: "--no-jinja",
		gen:   hint("llamagen formats chats with llama.cpp's built-in templates (--chat-template NAME)"),
		serve: hint("llamaserve always renders the model's Jinja template; --chat-template NAME picks one of llama.cpp's built-in templates instead")},
	{names: "--chat-template", value: true, gen: to("chat-template"), serve: to("chat-template")},
	{names: "--chat-template-file", value: true,
		gen: hint(`give the template's text: --chat-template "$(cat FILE)"`), serve: hint(`give the template's text: --chat-template "$(cat FILE)"`)},
	{names: "-sys,--system-prompt", value: true, gen: to("system"), serve: hint("requests carry their system messages")},
	{names: "-cnv,--conversation", gen: to("chat"), serve: hint("llamaserve answers /v1/chat/completions")},
	{names: "-i,--interactive,-if,--interactive-first", gen: hint("--chat reads user turns from stdin"), serve: hint("llamaserve answers /v1/chat/completions")},
	{names: "-r,--reverse-prompt", value: true, gen: to("stop-strings"), serve: hint("requests take stop")},
	{names: "--ignore-eos", gen: hint("--min-new-tokens N bans the end-of-sequence tokens until N tokens are generated"), serve: hint(serveSampling)},
	{names: "-l,--logit-bias", value: true,
		gen:   hint(`--sequence-bias '[[[TOKEN],BIAS]]' adds BIAS to the token's score`),
		serve: hint("requests take logit_bias")},
	{names: "--no-escape", gen: noop, serve: hint(serveNoPrompt)},
	{names: "-e,--escape", gen: hint(`llamagen takes the prompt as it is, without llama.cpp's \n escapes: use the shell's $'...' quotes`), serve: hint(serveNoPrompt)},
	{names: "-a,--alias", value: true, gen: hint(genNoServer), serve: to("alias")},
	{names: "--embedding,--embeddings", gen: hint("llamaserve --embeddings serves /v1/embeddings"), serve: to("embeddings")},
	{names: "-md,--model-draft", value: true, gen: to("assistant-model"), serve: to("assistant-model")},
	{names: "-ctk,--cache-type-k,-ctv,--cache-type-v", value: true,
		gen: hint("llamagen's KV cache is f16"), serve: hint("--cache-type f16|f32 sets the type of K and V together")},
	{names: "-fa,--flash-attn", value: true,
		gen: hint("llama.cpp chooses flash attention itself (auto)"), serve: hint("llama.cpp chooses flash attention itself (auto); --cache-type f32 turns it off")},
	{names: "-cb,--cont-batching", gen: hint("llamaserve batches continuously"), serve: noop},
	{names: "-nocb,--no-cont-batching", gen: hint("llamaserve batches continuously"), serve: hint("llamaserve always batches continuously")},
	{names: "--metrics", gen: hint(genNoServer), serve: noop},
	{names: "-hf,-hfr,--hf-repo,-hff,--hf-file,-mu,--model-url", value: true,
		gen: hint("llamaloop downloads nothing: give a local file with -m FILE.gguf"), serve: hint("llamaloop downloads nothing: give a local file with -m FILE.gguf")},
	{names: "--context-shift", gen: hint(genFull), serve: hint(serveFull)},
	{names: "-cram,--cache-ram", value: true,
		gen: hint("llamagen --chat keeps the conversation's cells in a sequence of the context"), serve: conv(cacheRAM)},
	{names: "--keep", value: true, gen: hint(genFull), serve: hint(serveFull)},
	{names: "--usage", gen: to("help"), serve: to("help")},
}

// translation is one command line being rewritten: the values of the
// command's own options given so far (the last one of each, as the flag
// package keeps), and what llama.cpp's options left to the end.
type translation struct {
	fs       *flag.FlagSet
	ours     map[string]string
	given    map[string]string // llama.cpp's options that need the whole line, by table name
	spelling map[string]string // how the user spelled them
	spelled  string            // the option being converted, as the user spelled it
}

// own is the value of our option name: the last given, else its default.
func (t *translation) own(name string) string {
	if v, ok := t.ours[name]; ok {
		return v
	}
	if f := t.fs.Lookup(name); f != nil {
		return f.DefValue
	}
	return ""
}

// later keeps a llama.cpp option whose meaning depends on others for the
// end of the line.
func (t *translation) later(key, v string) ([]string, error) {
	t.given[key] = v
	t.spelling[key] = t.spelled
	return nil, nil
}

// TranslateLlamaFlags rewrites llama.cpp's options in args as cmd's own,
// with fs the command's flag set (its own options are passed as they are
// and shadow llama.cpp's of the same name). An option of llama.cpp whose
// meaning the command does not have, or has for other values, is a
// UsageError with a hint. Arguments after "--" or the first non-option are
// left alone, as the flag package leaves them.
func TranslateLlamaFlags(cmd Command, fs *flag.FlagSet, args []string) ([]string, error) {
	t := &translation{fs: fs, ours: map[string]string{}, given: map[string]string{}, spelling: map[string]string{}}
	var out []string
	emit := func(words ...string) {
		for i := 0; i < len(words); i++ {
			w := words[i]
			name, v, inline := strings.Cut(strings.TrimLeft(w, "-"), "=")
			if f := fs.Lookup(name); f != nil {
				if !inline && !isBool(f) && i+1 < len(words) {
					i++
					v = words[i]
					w += "=" + v
				} else if !inline {
					v = "true"
				}
				t.ours[name] = v
			}
			out = append(out, w)
		}
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" || len(a) < 2 || a[0] != '-' {
			out = append(out, args[i:]...)
			break
		}
		spelled, v, inline := strings.Cut(a, "=")
		name := strings.TrimPrefix(strings.TrimPrefix(spelled, "-"), "-")
		if f := fs.Lookup(name); f != nil {
			if _, again := t.ours[name]; again && cmd == Llamaserve && name == "api-key" {
				// llama-server allows every key given; llamaserve one.
				return nil, Usagef("--api-key given twice: llamaserve takes one key (llama-server allows each)")
			}
			if !inline && !isBool(f) && i+1 < len(args) {
				i++
				v = args[i]
				inline = true
			}
			if inline {
				emit(spelled + "=" + v)
			} else {
				emit(a)
			}
			continue
		}
		lf := findLlamaFlag(name)
		if lf == nil {
			if slices.Contains(llamaCppNames, name) {
				return nil, Usagef("llama.cpp's option %s has no counterpart in %s", spelled, cmd)
			}
			out = append(out, a) // the flag package reports it
			continue
		}
		u := lf.gen
		if cmd == Llamaserve {
			u = lf.serve
		}
		switch {
		case lf.value && !inline && i+1 < len(args):
			i++
			v = args[i]
		case lf.value && !inline:
			return nil, Usagef("option %s needs a value", spelled)
		case !lf.value && inline:
			return nil, Usagef("option %s takes no value", spelled)
		}
		switch {
		case u.to != "":
			if lf.value {
				emit("--" + u.to + "=" + v)
			} else {
				emit("--" + u.to)
			}
		case u.conv != nil:
			t.spelled = spelled
			words, err := u.conv(v, t)
			if err != nil {
				return nil, Usagef("%s %s: %v", spelled, v, err)
			}
			emit(words...)
		case u.hint != "":
			return nil, Usagef("llama.cpp's option %s: %s", spelled, u.hint)
		default:
			return nil, Usagef("llama.cpp's option %s has no counterpart in %s", spelled, cmd)
		}
	}
	end, err := t.finish()
	if err != nil {
		return nil, err
	}
	return append(out, end...), nil
}

// finish resolves the options whose meaning depends on the whole line.
func (t *translation) finish() ([]string, error) {
	var end []string
	if err := t.repetition(&end); err != nil {
		return nil, err
	}
	if c, ok := t.given["ctx-size"]; ok {
		n, _ := strconv.Atoi(c)
		par, err := strconv.Atoi(t.own("parallel"))
		if err != nil || par < 1 {
			return nil, Usagef("%s %s: --parallel must be at least 1 to share the context among", t.spelling["ctx-size"], c)
		}
		if n/par < 1 {
			return nil, Usagef("%s %d: fewer cells than the %d sequences of --parallel", t.spelling["ctx-size"], n, par)
		}
		end = append(end, "--ctx="+strconv.Itoa(n/par))
	}
	h, hok := t.given["host"]
	p, pok := t.given["port"]
	if hok || pok {
		addr := t.own("addr")
		oldHost, oldPort, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, Usagef("--addr %s: %v", addr, err)
		}
		if !hok {
			h = oldHost
		}
		if !pok {
			p = oldPort
		}
		end = append(end, "--addr="+net.JoinHostPort(h, p))
	}
	return end, nil
}

// repetition resolves --repeat-penalty and --repeat-last-n. llama.cpp
// penalizes the tokens of the last --repeat-last-n (64) tokens;
// transformers' repetition_penalty every token of the prompt and the
// generation, which is llama.cpp's --repeat-last-n -1.
func (t *translation) repetition(end *[]string) error {
	penalty, pok := t.given["repeat-penalty"]
	lastN, lok := t.given["repeat-last-n"]
	if !pok {
		return nil // llama.cpp's default penalty 1.0 penalizes nothing, whatever the window
	}
	x, _ := strconv.ParseFloat(penalty, 64)
	n := 64
	if lok {
		n, _ = strconv.Atoi(lastN)
	}
	switch {
	case x == 1 || n == 0:
		*end = append(*end, "--repetition-penalty=1")
	case n == -1:
		*end = append(*end, "--repetition-penalty="+penalty)
	default:
		return Usagef("%s %s: llama.cpp penalizes the last %d tokens (--repeat-last-n), transformers' --repetition-penalty every token of the prompt and of the output: "+
			"give --repetition-penalty %s, or add --repeat-last-n -1", t.spelling["repeat-penalty"], penalty, n, penalty)
	}
	return nil
}

// spellings are lf's names without their dashes, as the flag package
// reads them.
func (lf *llamaFlag) spellings() []string {
	names := strings.Split(lf.names, ",")
	for i, n := range names {
		names[i] = strings.TrimLeft(n, "-")
	}
	return names
}

func findLlamaFlag(name string) *llamaFlag {
	for i := range llamaFlags {
		if slices.Contains(llamaFlags[i].spellings(), name) {
			return &llamaFlags[i]
		}
	}
	return nil
}

func atoi(v string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("not an integer")
	}
	return n, nil
}

// nPredict: -n N ≥ 1 is --max-new-tokens; llama.cpp's -1 (no end) and -2
// (until the context is full) have no counterpart.
func nPredict(v string, _ *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n >= 1:
		return []string{"--max-new-tokens", strconv.Itoa(n)}, nil
	case n == -1:
		return nil, fmt.Errorf("llama.cpp's -1 generates without end; llamagen needs a bound: give -n N (up to 16777216; generation also ends at the end-of-sequence token)")
	case n == -2:
		return nil, fmt.Errorf("llama.cpp's -2 generates until the context is full: give -c N and -n N (llamagen stops when the context is full, with a notice)")
	}
	return nil, fmt.Errorf("llamagen generates at least 1 token: give -n N from 1 up")
}

// genCtxSize: -c N ≥ 1 is --ctx N (llama-cli's one sequence; llamagen's
// --ctx is per sequence); llama.cpp's 0 (the model's training context)
// has no counterpart.
func genCtxSize(v string, _ *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n >= 1:
		return []string{"--ctx", strconv.Itoa(n)}, nil
	case n == 0:
		return nil, fmt.Errorf("llama.cpp's 0 is the model's training context; llamagen's --ctx 0 (its default) sizes the cache for the prompt and --max-new-tokens: leave -c out, or give -c N")
	}
	return nil, fmt.Errorf("must be from 1 up")
}

// serveCtxSize: llama-server's -c is the cells of all slots together;
// llamaserve's --ctx is per sequence, so -c N is --ctx N/--parallel.
func serveCtxSize(v string, t *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return nil, fmt.Errorf("llama.cpp's 0 is the model's training context: give -c N (the cells of all --parallel sequences together, as llama-server shares them) or --ctx N per sequence")
	case n < 0:
		return nil, fmt.Errorf("must be from 1 up")
	}
	return t.later("ctx-size", strconv.Itoa(n))
}

func serveParallel(v string, _ *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n == -1:
		return nil, fmt.Errorf("llama-server's -1 (auto) is 4 slots: leave -np out for llamaserve's 4")
	case n < 1:
		return nil, fmt.Errorf("must be at least 1")
	}
	return []string{"--parallel", strconv.Itoa(n)}, nil
}

// cacheRAM converts llama-server's host-memory prompt cache size: 0 turns
// prompt reuse off; llamaserve keeps prompts in KV cells instead.
func cacheRAM(v string, _ *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n == 0:
		return []string{"--prefix-cache=false"}, nil
	}
	return nil, fmt.Errorf("llamaserve keeps finished prompts in the KV cells of its sequences, not in host memory: --cache-slots N adds N sequences for them, --cache-cells N bounds the tokens kept, -cram 0 (--prefix-cache=false) turns prompt reuse off")
}

func threads(v string, _ *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n < 1:
		return nil, fmt.Errorf("llama.cpp's %d means its default: leave -t out for the command's default", n)
	}
	return []string{"--threads", strconv.Itoa(n)}, nil
}

// seed: llama.cpp's seeds are 32-bit and 4294967295 (its -1) is a random
// one, as llamagen's -1 is.
func seed(v string, _ *translation) ([]string, error) {
	s := strings.TrimSpace(v)
	if s == "-1" {
		return []string{"--seed", "-1"}, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	switch {
	case err != nil:
		return nil, fmt.Errorf("not a seed from 0 to %d (or -1: a random one)", uint32(math.MaxUint32))
	case n == math.MaxUint32:
		return []string{"--seed", "-1"}, nil
	case n > math.MaxUint32:
		return nil, fmt.Errorf("llama.cpp's seeds are 32-bit; give --seed N for a larger one")
	}
	return []string{"--seed", s}, nil
}

// temp: llama.cpp samples at a temperature above 0 and is greedy at 0 (or
// below); transformers samples only with do_sample.
func temp(v string, _ *translation) ([]string, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	switch {
	case err != nil || math.IsNaN(f) || math.IsInf(f, 0):
		return nil, fmt.Errorf("not a finite number")
	case f <= 0:
		return []string{"--do-sample=false"}, nil
	}
	return []string{"--temperature", v, "--do-sample"}, nil
}

func repeatPenalty(v string, t *translation) ([]string, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("not a finite number")
	}
	return t.later("repeat-penalty", strings.TrimSpace(v))
}

func repeatLastN(v string, t *translation) ([]string, error) {
	n, err := atoi(v)
	switch {
	case err != nil:
		return nil, err
	case n < -1:
		return nil, fmt.Errorf("must be -1 (the whole context), 0 (off) or more")
	}
	return t.later("repeat-last-n", strconv.Itoa(n))
}

func port(v string, t *translation) ([]string, error) {
	n, err := atoi(v)
	if err != nil || n < 0 || n > 65535 {
		return nil, fmt.Errorf("not a port from 0 to 65535")
	}
	return t.later("port", strconv.Itoa(n))
}

func host(v string, t *translation) ([]string, error) {
	if strings.HasSuffix(v, ".sock") {
		return nil, fmt.Errorf("llamaserve listens on TCP only, not on a Unix socket")
	}
	return t.later("host", v)
}

// LlamaAliases are the spellings of llama.cpp's options that cmd takes
// (those it does not have by its own name), for tests.
func LlamaAliases(cmd Command) []string {
	var out []string
	for _, lf := range llamaFlags {
		u := lf.gen
		if cmd == Llamaserve {
			u = lf.serve
		}
		if u.to == "" && u.conv == nil {
			continue
		}
		for _, n := range strings.Split(lf.names, ",") {
			if !cmd.own(strings.TrimLeft(n, "-")) {
				out = append(out, n)
			}
		}
	}
	return out
}

// LlamaFlagsHelp is the help's section on llama.cpp's options for cmd:
// the spellings taken and the options they stand for.
func LlamaFlagsHelp(cmd Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nllama.cpp's options (%s takes them with the same meaning; others are refused with a hint):\n", cmd)
	var lines []string
	for _, lf := range llamaFlags {
		u := lf.gen
		if cmd == Llamaserve {
			u = lf.serve
		}
		if u.to == "" && u.conv == nil {
			continue
		}
		var spelled []string
		for _, n := range strings.Split(lf.names, ",") {
			if !cmd.own(strings.TrimLeft(n, "-")) {
				spelled = append(spelled, n)
			}
		}
		if len(spelled) == 0 {
			continue
		}
		target := "--" + u.to
		if u.to == "" {
			target = aliasNotes[cmd][lf.names]
		}
		if target == "" {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %-28s→ %s", strings.Join(spelled, ", "), target))
	}
	b.WriteString(strings.Join(lines, "\n"))
	b.WriteString("\n")
	return b.String()
}

// own reports whether name is one of cmd's own options, which the help
// lists already.
func (c Command) own(name string) bool { return slices.Contains(ownNames[c], name) }

// ownNames are the options of the commands that llama.cpp spells alike.
var ownNames = map[Command][]string{
	Llamagen: {"m", "model", "p", "prompt", "f", "file", "threads", "seed", "gpu-layers", "top-k", "top-p", "min-p",
		"mirostat", "chat-template", "json-schema", "grammar", "version", "h", "help"},
	Llamaserve: {"m", "model", "threads", "gpu-layers", "parallel", "chat-template", "api-key", "alias", "embeddings",
		"version", "h", "help"},
}

// aliasNotes say what the converted options become.
var aliasNotes = map[Command]map[string]string{
	Llamagen: {
		"-n,--predict,--n-predict": "--max-new-tokens N (N ≥ 1; llama.cpp's -1 and -2 are refused)",
		"-c,--ctx-size":            "--ctx N (N ≥ 1; llama.cpp's 0, the model's context, is refused)",
		"-t,--threads":             "--threads N (N ≥ 1)",
		"-s,--seed":                "--seed (4294967295 and -1: a random seed)",
		"--temp":                   "--temperature T --do-sample (T > 0); greedy for T ≤ 0",
		"--repeat-penalty":         "--repetition-penalty X with --repeat-last-n -1 (the whole context, as transformers)",
		"--repeat-last-n":          "-1 (whole context) or 0 (off), with --repeat-penalty",
		"--no-escape":              "accepted: llamagen never unescapes the prompt",
	},
	Llamaserve: {
		"-c,--ctx-size":       "--ctx N/P: llama-server's -c is the cells of all P --parallel slots together",
		"-t,--threads":        "--threads N (N ≥ 1)",
		"-np,--parallel":      "--parallel N (N ≥ 1)",
		"--port":              "the port of --addr",
		"--host":              "the host of --addr",
		"--jinja":             "accepted: llamaserve always renders the model's Jinja template",
		"-cb,--cont-batching": "accepted: llamaserve always batches continuously",
		"--metrics":           "accepted: GET /metrics is always served",
	},
}
