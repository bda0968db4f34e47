package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/llamaloop/llamaloop/internal/cli"
	"github.com/llamaloop/llamaloop/llamacpp"
)

// lbFieldType is how a field is written in JSON and typed in SQL, as
// llama-bench's test::get_field_type has it.
type lbFieldType int

const (
	lbString lbFieldType = iota
	lbBool
	lbInt
	lbFloat
)

// lbField is one column of the llama-bench-style output.
type lbField struct {
	name string
	typ  lbFieldType
}

// lbFields are llama-bench's fields at the pinned commit, in its order and
// with its types (tools/llama-bench/llama-bench.cpp, test::get_fields and
// get_field_type), then llamabench's own: llamaloop's version, whether the
// binary is a portable (baseline) build, and the median and the lowest of
// the repetitions' tokens/s. Fields that llamaloop has no option for
// carry the value that describes what it does (poll 50, use_mmap 1, ...).
var lbFields = []lbField{
	{"build_commit", lbString}, {"build_number", lbInt}, {"cpu_info", lbString}, {"gpu_info", lbString},
	{"backends", lbString}, {"model_filename", lbString}, {"model_type", lbString}, {"model_size", lbInt},
	{"model_n_params", lbInt}, {"n_batch", lbInt}, {"n_ubatch", lbInt}, {"n_threads", lbInt},
	{"cpu_mask", lbString}, {"cpu_strict", lbBool}, {"poll", lbInt}, {"type_k", lbString}, {"type_v", lbString},
	{"n_gpu_layers", lbInt}, {"n_cpu_moe", lbInt}, {"split_mode", lbString}, {"main_gpu", lbInt},
	{"no_kv_offload", lbBool}, {"flash_attn", lbBool}, {"devices", lbString}, {"tensor_split", lbString},
	{"tensor_buft_overrides", lbString}, {"use_mmap", lbBool}, {"embeddings", lbBool}, {"no_op_offload", lbInt},
	{"no_host", lbBool}, {"n_prompt", lbInt}, {"n_gen", lbInt}, {"n_depth", lbInt}, {"test_time", lbString},
	{"avg_ns", lbInt}, {"stddev_ns", lbInt}, {"avg_ts", lbFloat}, {"stddev_ts", lbFloat},
	// llamabench's own
	{"llamaloop", lbString}, {"portable_build", lbBool}, {"median_ts", lbFloat}, {"min_ts", lbFloat},
}

// lbBuild is what every row says of the binary and the machine.
type lbBuild struct {
	commit              string
	number              int
	cpuInfo, gpuInfo    string
	backends, llamaloop string
	portable            bool
}

func describeLBBuild() lbBuild {
	b := lbBuild{commit: cli.LlamaCppCommit, llamaloop: cli.BuildVersion().Llamaloop, portable: detectBuild().portable()}
	// llama-bench's build_number is upstream's b-number: b7416 of "b7416+21"
	b.number, _ = strconv.Atoi(strings.TrimPrefix(strings.SplitN(cli.LlamaCppBuild, "+", 2)[0], "b"))
	if cli.External {
		b.commit, b.number = "unknown", 0 // llama.cpp's own build info is not in its installed headers
	}
	var cpus, gpus, backends []string
	for _, d := range llamacpp.Devices() {
		switch d.Type {
		case llamacpp.DeviceCPU, llamacpp.DeviceAccel:
			cpus = append(cpus, d.Description)
		default:
			gpus = append(gpus, d.Description)
			if name := strings.TrimRight(d.Name, "0123456789"); !slices.Contains(backends, name) {
				backends = append(backends, name)
			}
		}
	}
	b.cpuInfo, b.gpuInfo = strings.Join(cpus, ", "), strings.Join(gpus, ", ")
	b.backends = "CPU"
	if len(backends) > 0 {
		b.backends = strings.Join(backends, ",")
	}
	return b
}

// tokensPerS are a row's samples as tokens per second.
func (r *lbRow) tokensPerS() []float64 {
	ts := make([]float64, len(r.samplesNs))
	for i, ns := range r.samplesNs {
		ts[i] = 1e9 * float64(r.prompt+r.gen) / float64(ns)
	}
	return ts
}

// meanStddev is the mean and the sample standard deviation (n-1), 0 for
// fewer than two values, as llama-bench's avg and stdev.
func meanStddev(v []float64) (mean, sd float64) {
	if len(v) == 0 {
		return 0, 0
	}
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	if len(v) < 2 {
		return mean, 0
	}
	for _, x := range v {
		sd += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(sd / float64(len(v)-1))
}

// values are the row's fields as strings, in lbFields' order, written as
// llama-bench writes them (integers, booleans as 0 and 1, floats with six
// decimals).
func (r *lbRow) values(b lbBuild) []string {
	ns := make([]float64, len(r.samplesNs))
	for i, s := range r.samplesNs {
		ns[i] = float64(s)
	}
	avgNs, sdNs := meanStddev(ns)
	ts := r.tokensPerS()
	avgTs, sdTs := meanStddev(ts)
	st := newStat(ts)
	i := strconv.Itoa
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 6, 64) }
	return []string{
		b.commit, i(b.number), b.cpuInfo, b.gpuInfo, b.backends, r.modelFile, r.modelType,
		strconv.FormatUint(r.modelSize, 10), strconv.FormatUint(r.modelParams, 10), i(r.batch), i(r.ubatch), i(r.threads),
		"0x0", "0", "50", string(r.typeK), string(r.typeV), i(r.gpuLayers), "0", "layer", "0",
		"0", boolDigit(r.flashAttn), "auto", "0.00", "none", "1", "0", "0", "0",
		i(r.prompt), i(r.gen), i(r.depth), r.testTime.Format("2006-01-02T15:04:05Z"),
		strconv.FormatInt(int64(math.Round(avgNs)), 10), strconv.FormatInt(int64(math.Round(sdNs)), 10), f(avgTs), f(sdTs),
		b.llamaloop, boolDigit(b.portable), f(st.Median), f(st.Min),
	}
}

// lbPrinter writes the rows in one -o format.
type lbPrinter interface {
	header()
	row(r *lbRow)
	footer()
}

func newLBPrinter(format string, w io.Writer, b lbBuild, o *options) lbPrinter {
	switch format {
	case "csv":
		return &csvPrinter{w: w, b: b}
	case "json":
		return &jsonPrinter{w: w, b: b}
	case "jsonl":
		return &jsonPrinter{w: w, b: b, lines: true}
	case "sql":
		return &sqlPrinter{w: w, b: b}
	}
	return newMarkdownPrinter(w, b, o)
}

type csvPrinter struct {
	w io.Writer
	b lbBuild
}

func (p *csvPrinter) header() {
	names := make([]string, len(lbFields))
	for i, f := range lbFields {
		names[i] = f.name
	}
	fmt.Fprintln(p.w, strings.Join(names, ","))
}

func (p *csvPrinter) row(r *lbRow) {
	vals := r.values(p.b)
	for i, v := range vals {
		vals[i] = `"` + strings.ReplaceAll(v, `"`, `""`) + `"`
	}
	fmt.Fprintln(p.w, strings.Join(vals, ","))
}

func (p *csvPrinter) footer() {}

// jsonPrinter writes a JSON array of objects (json) or one object a line
// (jsonl), each with llama-bench's fields and its samples_ns and samples_ts.
type jsonPrinter struct {
	w     io.Writer
	b     lbBuild
	lines bool
	rows  int
}

func (p *jsonPrinter) header() {
	if !p.lines {
		fmt.Fprint(p.w, "[\n")
	}
}

func (p *jsonPrinter) row(r *lbRow) {
	var fields []string
	for i, v := range r.values(p.b) {
		fields = append(fields, fmt.Sprintf("%q: %s", lbFields[i].name, jsonValue(lbFields[i].typ, v)))
	}
	ns := make([]string, len(r.samplesNs))
	for i, s := range r.samplesNs {
		ns[i] = strconv.FormatInt(s, 10)
	}
	ts := r.tokensPerS()
	tss := make([]string, len(ts))
	for i, t := range ts {
		tss[i] = strconv.FormatFloat(t, 'g', 6, 64)
	}
	fields = append(fields, fmt.Sprintf(`"samples_ns": [ %s ]`, strings.Join(ns, ", ")),
		fmt.Sprintf(`"samples_ts": [ %s ]`, strings.Join(tss, ", ")))
	if p.lines {
		fmt.Fprintf(p.w, "{%s}\n", strings.Join(fields, ", "))
		return
	}
	if p.rows > 0 {
		fmt.Fprint(p.w, ",\n")
	}
	p.rows++
	fmt.Fprintf(p.w, "  {\n    %s\n  }", strings.Join(fields, ",\n    "))
}

func (p *jsonPrinter) footer() {
	if !p.lines {
		fmt.Fprint(p.w, "\n]\n")
	}
}

// jsonValue writes v as field type t has it in llama-bench's JSON.
func jsonValue(t lbFieldType, v string) string {
	switch t {
	case lbString:
		b, _ := json.Marshal(v) // strconv.Quote's \x escapes are not JSON
		return string(b)
	case lbBool:
		return strconv.FormatBool(v != "0")
	}
	return v
}

type sqlPrinter struct {
	w io.Writer
	b lbBuild
}

func (p *sqlPrinter) header() {
	fmt.Fprintln(p.w, "CREATE TABLE IF NOT EXISTS llama_bench (")
	for i, f := range lbFields {
		typ := map[lbFieldType]string{lbString: "TEXT", lbBool: "INTEGER", lbInt: "INTEGER", lbFloat: "REAL"}[f.typ]
		sep := ","
		if i == len(lbFields)-1 {
			sep = ""
		}
		fmt.Fprintf(p.w, "  %s %s%s\n", f.name, typ, sep)
	}
	fmt.Fprint(p.w, ");\n\n")
}

func (p *sqlPrinter) row(r *lbRow) {
	names := make([]string, len(lbFields))
	for i, f := range lbFields {
		names[i] = f.name
	}
	vals := r.values(p.b)
	for i, v := range vals {
		vals[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
	}
	fmt.Fprintf(p.w, "INSERT INTO llama_bench (%s) VALUES (%s);\n", strings.Join(names, ", "), strings.Join(vals, ", "))
}

func (p *sqlPrinter) footer() {}

// markdownPrinter writes llama-bench's table: model, size, params, backend,
// the options given more than one value or other than llama-bench's
// default, test and t/s (mean ± standard deviation), then llamabench's
// median and lowest t/s.
type markdownPrinter struct {
	w      io.Writer
	b      lbBuild
	fields []string
}

func newMarkdownPrinter(w io.Writer, b lbBuild, o *options) *markdownPrinter {
	lb := o.lb
	p := &markdownPrinter{w: w, b: b, fields: []string{"model", "size", "params", "backend"}}
	if b.backends != "CPU" {
		p.fields = append(p.fields, "ngl")
	}
	p.fields = append(p.fields, "threads") // llama-bench shows it on the CPU always
	differs := func(vals []int, def int) bool { return len(vals) != 1 || vals[0] != def }
	if differs(lb.batches.vals, 2048) {
		p.fields = append(p.fields, "n_batch")
	}
	if differs(lb.ubatches.vals, 512) {
		p.fields = append(p.fields, "n_ubatch")
	}
	if len(lb.typeK.vals) != 1 || lb.typeK.vals[0] != llamacpp.KVF16 {
		p.fields = append(p.fields, "type_k")
	}
	if len(lb.typeV.vals) != 1 || lb.typeV.vals[0] != llamacpp.KVF16 {
		p.fields = append(p.fields, "type_v")
	}
	if len(lb.flashAttn.vals) != 1 || lb.flashAttn.vals[0] {
		p.fields = append(p.fields, "fa")
	}
	p.fields = append(p.fields, "test", "t/s", "median t/s", "min t/s")
	return p
}

// width is llama-bench's column width (negative: left-aligned).
func (p *markdownPrinter) width(field string) int {
	switch field {
	case "model":
		return -30
	case "t/s":
		return 20
	case "size", "params", "median t/s", "min t/s":
		return 10
	case "ngl", "fa":
		return 3
	case "threads", "n_batch":
		return 7
	case "n_ubatch":
		return 8
	case "type_k", "type_v":
		return 6
	case "test":
		return 15
	}
	return -max(len(field), 10)
}

func (p *markdownPrinter) header() {
	var head, rule strings.Builder
	for _, f := range p.fields {
		w := p.width(f)
		fmt.Fprintf(&head, " %*s |", w, f)
		align := ":"
		if w < 0 {
			align = "-"
		}
		fmt.Fprintf(&rule, " %s%s |", strings.Repeat("-", abs(w)-1), align)
	}
	fmt.Fprintf(p.w, "|%s\n|%s\n", head.String(), rule.String())
}

func abs(n int) int { return max(n, -n) }

func (p *markdownPrinter) row(r *lbRow) {
	ts := r.tokensPerS()
	avg, sd := meanStddev(ts)
	st := newStat(ts)
	var line strings.Builder
	for _, f := range p.fields {
		var v string
		w := p.width(f)
		switch f {
		case "model":
			v = r.modelType
		case "size":
			v = mibOrGib(r.modelSize)
		case "params":
			v = fmt.Sprintf("%.2f M", float64(r.modelParams)/1e6)
			if r.modelParams >= 1e9 {
				v = fmt.Sprintf("%.2f B", float64(r.modelParams)/1e9)
			}
		case "backend":
			v = p.b.backends
		case "ngl":
			v = strconv.Itoa(r.gpuLayers)
		case "threads":
			v = strconv.Itoa(r.threads)
		case "n_batch":
			v = strconv.Itoa(r.batch)
		case "n_ubatch":
			v = strconv.Itoa(r.ubatch)
		case "type_k":
			v = string(r.typeK)
		case "type_v":
			v = string(r.typeV)
		case "fa":
			v = boolDigit(r.flashAttn)
		case "test":
			v = testName(r.prompt, r.gen, r.depth)
		case "t/s":
			v = fmt.Sprintf("%.2f ± %.2f", avg, sd) // fmt pads by runes: ± is one column
		case "median t/s":
			v = fmt.Sprintf("%.2f", st.Median)
		case "min t/s":
			v = fmt.Sprintf("%.2f", st.Min)
		}
		fmt.Fprintf(&line, " %*s |", w, v)
	}
	fmt.Fprintf(p.w, "|%s\n", line.String())
}

func (p *markdownPrinter) footer() {
	fmt.Fprintf(p.w, "\nbuild: %s (%d)\n", p.b.commit, p.b.number)
	fmt.Fprintf(p.w, "llamaloop: %s; t/s is the mean ± the standard deviation of the repetitions, as llama-bench's\n", p.b.llamaloop)
	if p.b.portable {
		fmt.Fprintf(p.w, "%s\n", detectBuild().note())
	}
}

// mibOrGib writes a size as llama-bench's table does.
func mibOrGib(n uint64) string {
	if n < 1<<30 {
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
}
