package llamacpp_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The abort audit: every GGML_ASSERT and GGML_ABORT of the pinned
// llama.cpp's model loading, context creation and graph builders is a row
// of testdata/aborts.tsv, classified as prevented (by a check of the
// validation or of the Go API, named, with the TestCrashKinds case that
// proves it where there is one), unreachable (why), checked (a rule added
// in the audit) or open (a site the checks do not cover yet, with why).
// TestAbortAudit derives the sites from the sources, so that a newer
// llama.cpp with a new or changed site fails here, naming it, until it is
// classified.

// abortsFile is the audit's table, relative to the package.
const abortsFile = "testdata/aborts.tsv"

// abortsWriteEnv makes TestAbortAudit rewrite the table: rows of sites
// still in the sources keep their classification, new sites come as "open"
// and sites gone from the sources are dropped.
const abortsWriteEnv = "LLAMALOOP_ABORTS_WRITE"

// auditedSources are the files of the audit, relative to llama.cpp's src/:
// the graph builders and what loading a model (its vocabulary too) and
// making a context reach.
var auditedSources = []string{"models/*.cpp", "llama-model.cpp", "llama-graph.cpp", "llama-context.cpp",
	"llama-hparams.cpp", "llama-kv-cache.cpp", "llama-kv-cache-iswa.cpp", "llama-memory-recurrent.cpp",
	"llama-memory-hybrid.cpp", "llama-vocab.cpp"}

// abortSite is one GGML_ASSERT or GGML_ABORT, keyed without line numbers.
type abortSite struct {
	file, function, cond string
	n                    int // occurrence of the same file, function and condition
	line                 int // for messages only
}

func (s abortSite) key() string {
	return fmt.Sprintf("%s\t%s\t%s\t%d", s.file, s.function, s.cond, s.n)
}

// abortRow is a row of the table.
type abortRow struct {
	key    string
	class  string // prevented, unreachable, checked or open
	check  string // the validation's function or rule ("-" for unreachable)
	kind   string // the TestCrashKinds case, or "-"
	reason string
}

var abortClasses = []string{"prevented", "unreachable", "checked", "open"}

// stripComments blanks C++ comments, keeping newlines and string literals.
func stripComments(src string) string {
	b := []byte(src)
	for i := 0; i < len(b); i++ {
		switch {
		case b[i] == '"' || b[i] == '\'':
			q := b[i]
			for i++; i < len(b) && b[i] != q && b[i] != '\n'; i++ {
				if b[i] == '\\' {
					i++
				}
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for ; i+1 < len(b) && (b[i] != '*' || b[i+1] != '/'); i++ {
				if b[i] != '\n' {
					b[i] = ' '
				}
			}
			if i+1 < len(b) {
				b[i], b[i+1] = ' ', ' '
				i++
			}
		}
	}
	return string(b)
}

var (
	abortMacro = regexp.MustCompile(`\bGGML_(ASSERT|ABORT)\s*\(`)
	funcHead   = regexp.MustCompile(`^[A-Za-z_][^;(]*\(`)
	structHead = regexp.MustCompile(`^(?:struct|class)\s+(\w+)[^;]*$`)
	notFunc    = regexp.MustCompile(`^(template|struct|class|namespace|enum|union|using|typedef|static_assert|extern)\b`)
)

// abortSites finds the sites of one source file, named rel.
func abortSites(rel, src string) []abortSite {
	src = stripComments(src)
	lines := strings.Split(src, "\n")
	// The function around each line: the last definition that starts in
	// column 0 before it.
	fn := make([]string, len(lines))
	cur := "-"
	for i, l := range lines {
		if m := structHead.FindStringSubmatch(l); m != nil {
			cur = m[1] // a method defined in its struct's body
		} else if m := funcHead.FindString(l); m != "" && !notFunc.MatchString(l) && !strings.HasPrefix(l, "GGML_") {
			f := strings.Fields(strings.TrimSuffix(m, "("))
			cur = strings.TrimLeft(f[len(f)-1], "*&")
		}
		fn[i] = cur
	}
	var sites []abortSite
	seen := map[string]int{}
	for _, m := range abortMacro.FindAllStringSubmatchIndex(src, -1) {
		open := m[1] - 1
		depth, end := 0, -1
		for j := open; j < len(src) && end < 0; j++ {
			switch src[j] {
			case '"':
				for j++; j < len(src) && src[j] != '"'; j++ {
					if src[j] == '\\' {
						j++
					}
				}
			case '(':
				depth++
			case ')':
				if depth--; depth == 0 {
					end = j
				}
			}
		}
		if end < 0 {
			continue
		}
		if pre := src[:m[0]]; strings.HasSuffix(strings.TrimRight(pre[strings.LastIndexByte(pre, '\n')+1:], " \t"), "#define") {
			continue
		}
		line := strings.Count(src[:m[0]], "\n")
		cond := "GGML_" + src[m[2]:m[3]] + "(" + strings.Join(strings.Fields(src[open+1:end]), " ") + ")"
		s := abortSite{file: rel, function: fn[line], cond: cond, line: line + 1}
		k := s.file + "\t" + s.function + "\t" + s.cond
		seen[k]++
		s.n = seen[k]
		sites = append(sites, s)
	}
	return sites
}

// llamaAbortSites returns the sites of every audited file.
func llamaAbortSites(t *testing.T) []abortSite {
	t.Helper()
	dir := filepath.Join(llamaSource(t), "src")
	var sites []abortSite
	for _, pat := range auditedSources {
		files, err := filepath.Glob(filepath.Join(dir, pat))
		require.NoError(t, err)
		require.NotEmpty(t, files, pat)
		slices.Sort(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			rel, _ := filepath.Rel(dir, f)
			sites = append(sites, abortSites(filepath.ToSlash(rel), string(b))...)
		}
	}
	return sites
}

// readAborts reads the table.
func readAborts(t *testing.T) []abortRow {
	t.Helper()
	f, err := os.Open(abortsFile)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	defer f.Close()
	var rows []abortRow
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		if ln == 1 || strings.TrimSpace(sc.Text()) == "" {
			continue // the header
		}
		c := strings.Split(sc.Text(), "\t")
		require.Len(t, c, 8, "%s:%d: want 8 tab-separated columns", abortsFile, ln)
		rows = append(rows, abortRow{key: strings.Join(c[:4], "\t"), class: c[4], check: c[5], kind: c[6], reason: c[7]})
	}
	require.NoError(t, sc.Err())
	return rows
}

// writeAborts rewrites the table for sites, keeping the rows of old.
func writeAborts(t *testing.T, sites []abortSite, old map[string]abortRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("file\tfunction\tcondition\tn\tclass\tcheck\tkind\treason\n")
	for _, s := range sites {
		r, ok := old[s.key()]
		if !ok {
			r = abortRow{class: "open", check: "-", kind: "-", reason: "-"}
		}
		fmt.Fprintf(&b, "%s\t%s\t%s\t%s\t%s\n", s.key(), r.class, r.check, r.kind, r.reason)
	}
	require.NoError(t, os.WriteFile(abortsFile, []byte(b.String()), 0o644))
}

// TestAbortAudit: the table holds exactly the sites of the pinned sources,
// each classified, with a reason, and a prevented or checked site names
// its check and, where it has one, a case of TestCrashKinds; open sites are
// logged.
func TestAbortAudit(t *testing.T) {
	if cgo.Engine != "module" {
		t.Skip("the audit's table classifies the abort sites of the pinned sources; the external engine's are not audited")
	}
	sites := llamaAbortSites(t)
	require.Greater(t, len(sites), 300, "sites in the audited sources")
	rows := readAborts(t)
	byKey := map[string]abortRow{}
	for _, r := range rows {
		_, dup := byKey[r.key]
		require.False(t, dup, "row twice: %s", r.key)
		byKey[r.key] = r
	}
	if os.Getenv(abortsWriteEnv) != "" {
		writeAborts(t, sites, byKey)
		t.Logf("wrote %s: %d sites", abortsFile, len(sites))
		return
	}
	inSource := map[string]bool{}
	for _, s := range sites {
		inSource[s.key()] = true
		if _, ok := byKey[s.key()]; !ok {
			t.Errorf("%s:%d: %s in %s is not in %s (run with %s=1 to add it as open, then classify it)",
				s.file, s.line, s.cond, s.function, abortsFile, abortsWriteEnv)
		}
	}
	kinds := map[string]bool{}
	for _, n := range llamacppCrashKindNames() {
		kinds[n] = true
	}
	counts := map[string]int{}
	for _, r := range rows {
		if !inSource[r.key] {
			t.Errorf("%s: no longer in the sources", strings.ReplaceAll(r.key, "\t", " | "))
			continue
		}
		counts[r.class]++
		name := strings.ReplaceAll(r.key, "\t", " | ")
		assert.Contains(t, abortClasses, r.class, name)
		assert.NotEqual(t, "-", r.reason, "%s: no reason (classify it)", name)
		if r.class == "open" {
			t.Logf("open: %s: %s", name, r.reason)
		}
		if r.class == "prevented" || r.class == "checked" {
			assert.NotEqual(t, "-", r.check, "%s: no check named", name)
		}
		if r.kind != "-" {
			for _, k := range strings.Split(r.kind, ";") {
				assert.True(t, kinds[k], "%s: no TestCrashKinds case %q", name, k)
			}
		}
	}
	t.Logf("%d sites: %v", len(rows), counts)
}

// llamacppCrashKindNames returns the names of TestCrashKinds' cases.
func llamacppCrashKindNames() []string {
	var out []string
	for _, c := range crashKinds {
		out = append(out, c.name)
	}
	return out
}
