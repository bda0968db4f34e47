// Command mkmodels writes the project's generated GGUF models into a folder:
//
//	go run ./internal/cmd/mkmodels -out build/models [-test] [-bench | -bench-small]
//
// It always writes demo.gguf (the Markov model of testmodel.DemoCorpus); with
// -test also the small test models (tiny-f32.gguf, tiny-f16.gguf,
// markov.gguf, prefix.gguf, tiny-t5.gguf), tiny-qwen2vl.gguf (tiny-f32 as
// an M-RoPE qwen2vl text model) and the projector files for llama.cpp's
// mtmd paired with tiny-f32.gguf or tiny-qwen2vl.gguf (tiny-gemma3.mmproj.gguf,
// tiny-qwen2vl.mmproj.gguf, tiny-qwen2a.mmproj.gguf); with -bench the random F16 benchmark models
// bench-small-f16.gguf (~134M weights) and bench-1b-f16.gguf (Llama 3.2 1B
// shape, 2.5 GB), and their q8_0, q4_0 and q4_K_M quantizations made by
// llama.cpp's own quantizer (bench-small-q8_0.gguf, ...). A file that already holds
// exactly the model (same fingerprint, complete) is kept, and a quantized
// file newer than its source too, so running it again is cheap. The
// benchmark models take about 5.9 GB in all: bench-small's four files 0.58
// GB (F16 269.0 MB, q8_0 143.3 MB, q4_0 82.6 MB, q4_K_M 85.9 MB, as
// written), bench-1b's about 5.3 GB (F16 2.47 GB, q8_0 1.31 GB, q4_0 0.76
// GB, q4_K_M 0.80 GB, from its shapes and llama.cpp's quantization types);
// -bench-small writes only bench-small's. With
// -speculative it also writes a speculative decoding pair (testmodel.Markov's
// Deeper and Noisy): demo-deep.gguf, the demo model computed through 12 zero
// layers (as costly per token as a 28M-weight model, its distributions
// unchanged), and demo-draft.gguf, the one-layer demo model with 30% of its
// rows replaced by noise.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
	"github.com/llamaloop/llamaloop/llamacpp"
)

type entry struct {
	file  string
	build func() (testmodel.Model, error)
}

func main() {
	out := flag.String("out", "build/models", "output folder")
	test := flag.Bool("test", false, "also write the small test models")
	bench := flag.Bool("bench", false, "also write the benchmark models bench-small and bench-1b (about 5.9 GB)")
	small := flag.Bool("bench-small", false, "also write the benchmark model bench-small alone (0.58 GB)")
	spec := flag.Bool("speculative", false, "also write the speculative decoding pair demo-deep.gguf and demo-draft.gguf")
	flag.Parse()
	set := noBench
	switch {
	case *bench:
		set = benchAll
	case *small:
		set = benchSmall
	}
	if err := run(*out, *test, set, *spec); err != nil {
		fmt.Fprintln(os.Stderr, "mkmodels:", err)
		os.Exit(1)
	}
}

// benchSet says which benchmark models to write.
type benchSet int

const (
	noBench    benchSet = iota
	benchSmall          // bench-small (F16 and its quantizations)
	benchAll            // bench-small and bench-1b
)

// benchEntries are the F16 benchmark models of set; quantize makes the
// others from them.
func benchEntries(set benchSet) []entry {
	var es []entry
	if set >= benchSmall {
		es = append(es, entry{"bench-small-f16.gguf", random(testmodel.BenchSmallSpec)})
	}
	if set >= benchAll {
		es = append(es, entry{"bench-1b-f16.gguf", random(testmodel.Bench1BSpec)})
	}
	return es
}

func run(out string, test bool, bench benchSet, spec bool) error {
	entries := []entry{{"demo.gguf", func() (testmodel.Model, error) { return testmodel.NewDemo() }}}
	if spec {
		entries = append(entries, speculativePair()...)
	}
	if test {
		entries = append(entries,
			entry{"tiny-f32.gguf", random(func() testmodel.Spec { return testmodel.TinySpec(gguf.TensorF32) })},
			entry{"tiny-f16.gguf", random(func() testmodel.Spec { return testmodel.TinySpec(gguf.TensorF16) })},
			entry{"markov.gguf", func() (testmodel.Model, error) {
				v := testmodel.TinyVocab(true)
				rows, err := testmodel.RandomTransitions(v.Size(), 1, testmodel.UNK, testmodel.BOS)
				if err != nil {
					return nil, err
				}
				return testmodel.NewMarkov("llamaloop-markov-oracle", v, rows)
			}},
			entry{"prefix.gguf", func() (testmodel.Model, error) { return testmodel.NewPrefix(1), nil }},
			entry{"tiny-t5.gguf", func() (testmodel.Model, error) { return testmodel.TinyT5(), nil }},
		)
		entries = append(entries, projectorEntries()...)
	}
	entries = append(entries, benchEntries(bench)...)
	for _, e := range entries {
		m, err := e.build()
		if err != nil {
			return fmt.Errorf("%s: %w", e.file, err)
		}
		path := filepath.Join(out, e.file)
		start := time.Now()
		wrote, err := testmodel.WriteIfStale(path, m)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if !wrote {
			fmt.Printf("%s: up to date\n", path)
			continue
		}
		st, err := os.Stat(path)
		if err != nil {
			return err
		}
		fmt.Printf("%s: wrote %.1f MB in %.1fs\n", path, float64(st.Size())/1e6, time.Since(start).Seconds())
	}
	if bench != noBench {
		for _, e := range entries {
			if strings.HasSuffix(e.file, "-f16.gguf") && strings.HasPrefix(e.file, "bench-") {
				if err := quantize(filepath.Join(out, e.file)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// quantize writes src's q8_0, q4_0 and q4_K_M versions beside it unless
// they are newer than src. q4_K_M is the 4-bit K-quant most models are run
// in on desktops; its kernels differ from q4_0's.
func quantize(src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(src, "-f16.gguf")
	for _, q := range []struct {
		name string
		ft   llamacpp.FileType
	}{{"q8_0", llamacpp.Q8_0}, {"q4_0", llamacpp.Q4_0}, {"q4_K_M", llamacpp.Q4_K_M}} {
		dst := base + "-" + q.name + ".gguf"
		if qs, err := os.Stat(dst); err == nil && qs.ModTime().After(st.ModTime()) {
			fmt.Printf("%s: up to date\n", dst)
			continue
		}
		start := time.Now()
		if err := llamacpp.Quantize(src, dst+".tmp", q.ft, 0); err != nil {
			return err
		}
		if err := os.Rename(dst+".tmp", dst); err != nil {
			return err
		}
		fmt.Printf("%s: quantized in %.1fs\n", dst, time.Since(start).Seconds())
	}
	return nil
}

// projectorEntries are the multimodal projector files (mmproj) for
// llama.cpp's mtmd, paired with tiny-f32.gguf (their output width is its
// n_embd).
func projectorEntries() []entry {
	return []entry{
		{"tiny-qwen2vl.gguf", func() (testmodel.Model, error) { return testmodel.TinyQwen2VLText(), nil }},
		{"tiny-gemma3.mmproj.gguf", func() (testmodel.Model, error) { return testmodel.TinyGemma3Projector(), nil }},
		{"tiny-qwen2vl.mmproj.gguf", func() (testmodel.Model, error) { return testmodel.TinyQwen2VLProjector(), nil }},
		{"tiny-qwen2a.mmproj.gguf", func() (testmodel.Model, error) { return testmodel.TinyQwen2AudioProjector(), nil }},
	}
}

func random(spec func() testmodel.Spec) func() (testmodel.Model, error) {
	return func() (testmodel.Model, error) { return testmodel.Random{Spec: spec()}, nil }
}

// speculativePair builds the speculative decoding pair over the demo model.
func speculativePair() []entry {
	return []entry{
		{"demo-deep.gguf", func() (testmodel.Model, error) {
			d, err := testmodel.NewDemo()
			if err != nil {
				return nil, err
			}
			return d.Deeper("llamaloop-demo-deep", 12, 1536), nil
		}},
		{"demo-draft.gguf", func() (testmodel.Model, error) {
			d, err := testmodel.NewDemo()
			if err != nil {
				return nil, err
			}
			return d.Noisy("llamaloop-demo-draft", 0.3, 1)
		}},
	}
}
