// Command campaign runs the hostile-input campaign of issue 35 against the
// built commands and the llamacpp test binary, each case in a child process
// under an address-space limit and a timeout, and prints a report per
// family: cases, clean errors, crash kinds (deduplicated), hangs and the
// children's peak RSS.
//
// Families:
//   - template: every hostile chat template of -templates (and a generated
//     100,000 nested ifs) written into a copy of the demo model as
//     tokenizer.chat_template; llamaserve is started on it and sent a chat
//     request, while a neighbour (/tokenize on its own connection) must be
//     answered within 1 s, and the server must survive and stop on SIGTERM.
//   - t5: the tiny T5 without block 0's relative-attention bias in the
//     encoder, the decoder or both, through llamagen and llamaserve; and
//     concurrent Encode, Decode and sequence ops on one context (the
//     llamacpp test TestT5ConcurrentEncodeDecode).
//   - cpu-variant: backend folders (LLAMALOOP_BACKEND_DIR) holding truncated,
//     corrupt or misplaced libraries, with llamagen --version and a short
//     generation.
//   - gguf: the files of the mutation tests (TestWriteMutations: byte-level
//     and structure-aware families), each exercised by TestExerciseChild.
//   - mmproj: the tiny projector files (gemma3, qwen2vl, qwen2a) mutated
//     by the same byte-level generators (TestWriteProjectorMutations), each
//     loaded beside tiny-f32 and made to encode an image or a second of
//     sound (TestExerciseProjectorChild).
//
// make campaign builds what it needs and runs it; see -h for the scale.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

type config struct {
	bin, models, templates, testbin, work string
	families                              string
	mutations, jobs                       int
	limit                                 uint64
	timeout, requestTimeout               time.Duration
	startupTimeout                        time.Duration
	report                                string
	errors                                bool
}

func main() {
	var cfg config
	var limitMB uint64
	flag.StringVar(&cfg.bin, "bin", "build/bin", "the `DIR` of llamagen and llamaserve")
	flag.StringVar(&cfg.models, "models", "build/models", "the `DIR` of demo.gguf (make models)")
	flag.StringVar(&cfg.templates, "templates", "internal/jinja/testdata/hostile", "the `DIR` of hostile chat templates (*.jinja)")
	flag.StringVar(&cfg.testbin, "testbin", "build/bin/llamacpp.test", "the llamacpp test binary (`FILE`, go test -c ./llamacpp)")
	flag.StringVar(&cfg.work, "work", "", "a `DIR` for the cases' files, kept afterwards (default: a temporary folder, removed)")
	flag.StringVar(&cfg.families, "families", "template,t5,cpu-variant,gguf,mmproj", "the `LIST` of families to run")
	flag.IntVar(&cfg.mutations, "mutations", 500, "the number of mutated GGUF files (`N`)")
	flag.IntVar(&cfg.jobs, "jobs", 2, "children run at once (`N`) in the families other than template, which runs one server at a time")
	flag.Uint64Var(&limitMB, "mem", 4096, "each child's address-space limit (RLIMIT_AS) in `MB`")
	flag.DurationVar(&cfg.timeout, "timeout", 60*time.Second, "each child's `DURATION` before it counts as a hang and is killed")
	flag.DurationVar(&cfg.requestTimeout, "request-timeout", 15*time.Second, "the `DURATION` a chat request may take before it counts as a hang")
	flag.DurationVar(&cfg.startupTimeout, "startup-timeout", 30*time.Second, "the `DURATION` llamaserve may take to listen (its template check included) before it counts as a hang")
	flag.StringVar(&cfg.report, "report", "", "also write the report to `FILE`")
	flag.BoolVar(&cfg.errors, "errors", false, "also list the most frequent clean errors of each family")
	flag.Parse()
	cfg.limit = limitMB << 20
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		os.Exit(1)
	}
}

// result is one case's outcome.
type result struct {
	family, name string
	took         time.Duration
	outcome
}

func run(cfg config) error {
	if cfg.work == "" {
		dir, err := os.MkdirTemp("", "llamaloop-campaign")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cfg.work = dir
	}
	families := map[string]func(config) ([]result, error){
		"template": templateFamily, "t5": t5Family, "cpu-variant": cpuFamily, "gguf": ggufFamily,
		"mmproj": mmprojFamily,
	}
	start := time.Now()
	var results []result
	for _, name := range strings.Split(cfg.families, ",") {
		f := families[strings.TrimSpace(name)]
		if f == nil {
			return fmt.Errorf("unknown family %q", name)
		}
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "campaign: %s...\n", name)
		rs, err := f(cfg)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		fmt.Fprintf(os.Stderr, "campaign: %s: %d cases in %s\n", name, len(rs), time.Since(t0).Round(time.Second))
		results = append(results, rs...)
	}
	var out io.Writer = os.Stdout
	if cfg.report != "" {
		f, err := os.Create(cfg.report)
		if err != nil {
			return err
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	writeReport(out, cfg, results, time.Since(start))
	return nil
}

// parallel runs f for every case, jobs at a time, and keeps their order.
func parallel[T any](jobs int, cases []T, f func(T) result) []result {
	out := make([]result, len(cases))
	sem := make(chan struct{}, max(jobs, 1))
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			t0 := time.Now()
			out[i] = f(c)
			out[i].took = time.Since(t0)
		}()
	}
	wg.Wait()
	return out
}

func writeReport(w io.Writer, cfg config, results []result, took time.Duration) {
	byFamily := map[string][]result{}
	var names []string
	for _, r := range results {
		if byFamily[r.family] == nil {
			names = append(names, r.family)
		}
		byFamily[r.family] = append(byFamily[r.family], r)
	}
	fmt.Fprintf(w, "Campaign of %s: %d cases in %s (%d CPUs, -jobs %d, -mem %d MB, -timeout %s, -mutations %d).\n\n",
		time.Now().UTC().Format("2006-01-02"), len(results), took.Round(time.Second), runtime.NumCPU(), cfg.jobs, cfg.limit>>20, cfg.timeout, cfg.mutations)
	fmt.Fprintln(w, "| family | cases | ok | clean errors | crashes | crash kinds | hangs | neighbour late | peak RSS | time |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var all [6]int
	var allTook time.Duration
	var allPeak int64
	for _, name := range names {
		var n [6]int // cases, ok, errors, crashes, hangs, neighbour late
		kinds := map[string]bool{}
		var peak int64
		var took time.Duration
		for _, r := range byFamily[name] {
			n[0]++
			took += r.took
			if r.late {
				n[5]++
			}
			switch r.class {
			case classOK:
				n[1]++
			case classError:
				n[2]++
			case classCrash:
				n[3]++
				kinds[r.kind] = true
			case classHang:
				n[4]++
			}
			peak = max(peak, r.rss)
		}
		for i := range n {
			all[i] += n[i]
		}
		allPeak = max(allPeak, peak)
		allTook += took
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %d | %d | %d | %d MB | %s |\n", name, n[0], n[1], n[2], n[3], len(kinds), n[4], n[5], peak>>20, took.Round(time.Second))
	}
	fmt.Fprintf(w, "| all | %d | %d | %d | %d | | %d | %d | %d MB | %s |\n\n", all[0], all[1], all[2], all[3], all[4], all[5], allPeak>>20, allTook.Round(time.Second))
	fmt.Fprintln(w, "(time: the children's wall time added up; neighbour late: cases whose /tokenize neighbour waited over 1 s while the server lived)")
	fmt.Fprintln(w)

	for _, name := range names {
		rs := byFamily[name]
		crashes := map[string][]string{}
		var hangs, notes []string
		errs := map[string]int{}
		for _, r := range rs {
			switch r.class {
			case classCrash:
				crashes[r.kind] = append(crashes[r.kind], r.name)
			case classHang:
				hangs = append(hangs, fmt.Sprintf("%s (%s)", r.name, r.kind))
			case classError:
				if cfg.errors {
					errs[firstWords(r.kind, 12)]++
				}
			}
			if r.note != "" {
				notes = append(notes, fmt.Sprintf("%s: %s", r.name, r.note))
			}
		}
		if len(crashes)+len(hangs)+len(notes) == 0 && len(errs) == 0 {
			continue
		}
		fmt.Fprintf(w, "%s:\n", name)
		for _, k := range sortedKeys(crashes, func(a, b string) bool { return len(crashes[a]) > len(crashes[b]) }) {
			cs := crashes[k]
			fmt.Fprintf(w, "- crash ×%d: `%s` (%s)\n", len(cs), k, examples(cs))
		}
		for _, h := range hangs {
			fmt.Fprintf(w, "- hang: %s\n", h)
		}
		for _, k := range sortedKeys(errs, func(a, b string) bool { return errs[a] > errs[b] })[:min(len(errs), 6)] {
			fmt.Fprintf(w, "- clean error ×%d: `%s`\n", errs[k], k)
		}
		for _, n := range notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
		fmt.Fprintln(w)
	}
}

func sortedKeys[V any](m map[string]V, less func(a, b string) bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if less(keys[i], keys[j]) != less(keys[j], keys[i]) {
			return less(keys[i], keys[j])
		}
		return keys[i] < keys[j]
	})
	return keys
}

func examples(names []string) string {
	if len(names) > 3 {
		return strings.Join(names[:3], ", ") + fmt.Sprintf(", … %d more", len(names)-3)
	}
	return strings.Join(names, ", ")
}

func firstWords(s string, n int) string {
	w := strings.Fields(s)
	return strings.Join(w[:min(n, len(w))], " ")
}

// mkdir makes a folder for a case under the work folder.
func mkdir(cfg config, parts ...string) (string, error) {
	dir := filepath.Join(append([]string{cfg.work}, parts...)...)
	return dir, os.MkdirAll(dir, 0o755)
}
