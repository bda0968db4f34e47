package main

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/llamaloop/llamaloop/internal/gguf"
	"github.com/llamaloop/llamaloop/internal/testkit/fakebackend"
	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
)

// t5Family: the tiny T5 without block 0's relative-attention bias (which
// llama.cpp marks optional everywhere and then reads for every block),
// through llamagen and llamaserve, beside the intact model; and the
// concurrent Encode/Decode test of the llamacpp package, three times.
func t5Family(cfg config) ([]result, error) {
	dir, err := mkdir(cfg, "t5")
	if err != nil {
		return nil, err
	}
	intact := filepath.Join(dir, "t5.gguf")
	if err := testmodel.TinyT5().Write(intact); err != nil {
		return nil, err
	}
	variants := []struct {
		name string
		drop []string
	}{
		{"intact", nil},
		{"no enc.blk.0.attn_rel_b", []string{"enc.blk.0.attn_rel_b.weight"}},
		{"no dec.blk.0.attn_rel_b", []string{"dec.blk.0.attn_rel_b.weight"}},
		{"no attn_rel_b in either block 0", []string{"enc.blk.0.attn_rel_b.weight", "dec.blk.0.attn_rel_b.weight"}},
	}
	type tcase struct {
		name string
		run  func() outcome
	}
	var cases []tcase
	for i, v := range variants {
		model := filepath.Join(dir, fmt.Sprintf("v%d.gguf", i))
		err := rewriteGGUF(intact, model, func(md []gguf.KV, ts []gguf.TensorInfo) ([]gguf.KV, []gguf.TensorInfo) {
			var kept []gguf.TensorInfo
			for _, ti := range ts {
				drop := false
				for _, d := range v.drop {
					drop = drop || ti.Name == d
				}
				if !drop {
					kept = append(kept, ti)
				}
			}
			return md, kept
		})
		if err != nil {
			return nil, err
		}
		cases = append(cases,
			tcase{v.name + ", llamagen", func() outcome {
				c := &child{args: []string{filepath.Join(cfg.bin, "llamagen"), "-m", model, "-p", "translate: hello",
					"--max-new-tokens", "4", "--threads", "1"}, limit: cfg.limit, timeout: cfg.timeout}
				return c.run()
			}},
			tcase{v.name + ", llamaserve", func() outcome {
				return serveCase(cfg, model, "/v1/completions", `{"prompt":"translate: hello","max_tokens":4}`)
			}})
	}
	cases = append(cases, tcase{"concurrent Encode, Decode and sequence ops (TestT5ConcurrentEncodeDecode ×3)", func() outcome {
		c := &child{args: []string{cfg.testbin, "-test.run=^TestT5ConcurrentEncodeDecode$", "-test.count=3"},
			limit: cfg.limit, timeout: cfg.timeout}
		return c.run()
	}})
	return parallel(cfg.jobs, cases, func(c tcase) result {
		return result{family: "t5", name: c.name, outcome: c.run()}
	}), nil
}

// cpuFamily: backend folders with damaged libraries, each with llamagen
// --version and a four-token generation on the demo model.
func cpuFamily(cfg config) ([]result, error) {
	root, err := mkdir(cfg, "cpu")
	if err != nil {
		return nil, err
	}
	type folder struct{ name, dir string }
	var folders []folder
	n := 0
	newDir := func() string {
		n++
		d := filepath.Join(root, strconv.Itoa(n))
		os.MkdirAll(d, 0o755)
		return d
	}
	if d := newDir(); true {
		if _, err := fakebackend.Build(d); err == nil {
			folders = append(folders, folder{"fake backend, intact (ggml refuses it)", d})
			for _, c := range fakebackend.Cases() {
				d := newDir()
				lib, err := fakebackend.Build(d)
				if err != nil {
					return nil, err
				}
				if err := c.Damage(d, lib); err != nil {
					return nil, fmt.Errorf("%s: %w", c.Name, err)
				}
				folders = append(folders, folder{"fake backend, " + c.Name, d})
			}
		} else {
			fmt.Fprintln(os.Stderr, "campaign: cpu-variant:", err, "(the compiled backend's cases are left out)")
		}
	}
	// Real libraries: the variants of make cpu-variants where built, and a
	// system library (any ELF shared object that is not a backend).
	var real []string
	if libs, _ := filepath.Glob("build/lib/libggml-cpu-*.so"); len(libs) > 0 {
		real = append(real, libs...)
	}
	if libz, _ := filepath.Glob("/lib/*/libz.so.1"); len(libz) > 0 {
		real = append(real, libz[0])
	}
	for _, src := range real {
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, err
		}
		name := filepath.Base(src)
		if !strings.HasPrefix(name, "libggml-") {
			name = "libggml-cpu-notggml.so"
		}
		for _, cut := range []struct {
			what string
			n    int
		}{{"whole", len(data)}, {"cut to 1 KiB", 1024}, {"cut in half", len(data) / 2}, {"one byte short", len(data) - 1}} {
			d := newDir()
			if strings.HasPrefix(filepath.Base(src), "libggml-") {
				// its ggml-base beside it, whole
				if base, _ := filepath.Glob(filepath.Join(filepath.Dir(src), "libggml-base.so*")); len(base) > 0 {
					for _, b := range base {
						bd, _ := os.ReadFile(b)
						os.WriteFile(filepath.Join(d, filepath.Base(b)), bd, 0o644)
					}
				}
			}
			if err := os.WriteFile(filepath.Join(d, name), data[:cut.n], 0o644); err != nil {
				return nil, err
			}
			folders = append(folders, folder{fmt.Sprintf("%s as %s, %s", filepath.Base(src), name, cut.what), d})
		}
	}
	random := make([]byte, 64<<10)
	rand.Read(random)
	d := newDir()
	os.WriteFile(filepath.Join(d, "libggml-cpu-x.so"), random, 0o644)
	folders = append(folders, folder{"random bytes", d})
	d = newDir()
	os.WriteFile(filepath.Join(d, "libggml-cpu-x.so"), nil, 0o644)
	folders = append(folders, folder{"empty file", d})
	d = newDir()
	os.WriteFile(filepath.Join(d, "libggml-cpu-x.so"), []byte("\x7fELF\x02\x01\x01"), 0o644)
	folders = append(folders, folder{"an ELF header's first bytes", d})
	folders = append(folders, folder{"empty folder", newDir()})
	folders = append(folders, folder{"missing folder", filepath.Join(root, "nowhere")})
	loop := filepath.Join(root, "loop")
	os.Symlink(loop, loop)
	folders = append(folders, folder{"folder in a link loop", loop})

	type ccase struct {
		name string
		args []string
		dir  string
	}
	demo := filepath.Join(cfg.models, "demo.gguf")
	var cases []ccase
	for _, f := range folders {
		cases = append(cases,
			ccase{f.name + ": --version", []string{filepath.Join(cfg.bin, "llamagen"), "--version"}, f.dir},
			ccase{f.name + ": generate", []string{filepath.Join(cfg.bin, "llamagen"), "-m", demo, "-p", "hello",
				"--max-new-tokens", "4", "--threads", "1"}, f.dir})
	}
	return parallel(cfg.jobs, cases, func(c ccase) result {
		ch := &child{args: c.args, env: []string{"LLAMALOOP_BACKEND_DIR=" + c.dir}, limit: cfg.limit, timeout: cfg.timeout}
		return result{family: "cpu-variant", name: c.name, outcome: ch.run()}
	}), nil
}

// ggufFamily: the mutated files of the llamacpp tests (TestWriteMutations:
// the same generators and seeds as TestRandomMutations), each loaded,
// tokenized and decoded by TestExerciseChild; the family of a case is the
// mutation's.
func ggufFamily(cfg config) ([]result, error) {
	return mutationFamily(cfg, mutationTests{name: "gguf", write: "TestWriteMutations", writeEnv: "LLAMALOOP_MUTATIONS_OUT",
		exercise: "TestExerciseChild", exerciseEnv: "LLAMALOOP_EXERCISE_PATH"})
}

// mutationTests names the llamacpp tests of a mutation family: write
// writes cfg.mutations files and their families.txt into the folder its
// writeEnv names; exercise tries the file its exerciseEnv names and prints
// its verdict.
type mutationTests struct {
	name, write, writeEnv, exercise, exerciseEnv string
}

// mutationFamily writes a family's mutated files and exercises each in a
// child; a case's family is the mutation's.
func mutationFamily(cfg config, m mutationTests) ([]result, error) {
	dir, err := mkdir(cfg, m.name)
	if err != nil {
		return nil, err
	}
	gen := &child{args: []string{cfg.testbin, "-test.run=^" + m.write + "$"},
		env:   []string{m.writeEnv + "=" + dir, "LLAMALOOP_MUTATIONS=" + strconv.Itoa(cfg.mutations)},
		limit: cfg.limit, timeout: 10 * cfg.timeout}
	if o := gen.run(); o.class != classOK {
		return nil, fmt.Errorf("writing the mutated files: %s %s\n%s", o.class, o.kind, o.output)
	}
	f, err := os.Open(filepath.Join(dir, "families.txt"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	type gcase struct{ file, family string }
	var cases []gcase
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if file, fam, ok := strings.Cut(sc.Text(), "\t"); ok {
			cases = append(cases, gcase{file, fam})
		}
	}
	return parallel(cfg.jobs, cases, func(c gcase) result {
		path := filepath.Join(dir, c.file)
		ch := &child{args: []string{cfg.testbin, "-test.run=^" + m.exercise + "$", "-test.v"},
			env: []string{m.exerciseEnv + "=" + path}, limit: cfg.limit, timeout: cfg.timeout}
		o := ch.run()
		if o.class == classOK || o.class == classError {
			o = exerciseResult(o)
		}
		if o.class != classCrash && o.class != classHang {
			os.Remove(path) // a crash's file is kept for a rerun under -work
		}
		return result{family: m.name + ": " + c.family, name: c.file, outcome: o}
	}), nil
}

// mmprojFamily: the three tiny projector files (gemma3, qwen2vl, qwen2a)
// mutated by the GGUF campaign's generators (TestWriteProjectorMutations),
// each loaded beside tiny-f32 and made to encode an image or a second of
// sound by TestExerciseProjectorChild; the family of a case is the seed's
// and the mutation's.
func mmprojFamily(cfg config) ([]result, error) {
	return mutationFamily(cfg, mutationTests{name: "mmproj", write: "TestWriteProjectorMutations",
		writeEnv: "LLAMALOOP_MMPROJ_MUTATIONS_OUT", exercise: "TestExerciseProjectorChild",
		exerciseEnv: "LLAMALOOP_MMPROJ_EXERCISE_PATH"})
}

// exerciseResult reads TestExerciseChild's verdict: ok, or a load or
// decode error.
func exerciseResult(o outcome) outcome {
	const prefix = "EXERCISE-RESULT: "
	for _, line := range strings.Split(o.output, "\n") {
		if s, ok := strings.CutPrefix(line, prefix); ok {
			if s == "ok" {
				o.class, o.kind = classOK, ""
			} else {
				o.class, o.kind = classError, normalise(s)
			}
			return o
		}
	}
	if o.class == classOK {
		o.class, o.kind = classCrash, "no verdict: "+firstError(o.output)
	}
	return o
}
