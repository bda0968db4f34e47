package jinja

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No template, hostile or broken, makes the engine panic (which Render
// would report as an internal error) or go over its budgets.
func FuzzTemplate(f *testing.F) {
	for _, dir := range []string{"testdata/hostile", "testdata/templates"} {
		names, _ := filepath.Glob(filepath.Join(dir, "*.jinja"))
		for _, n := range names {
			if src, err := os.ReadFile(n); err == nil && len(src) < 4096 {
				f.Add(string(src))
			}
		}
	}
	for _, c := range jinja2Cases {
		f.Add(c.src)
	}
	lim := Limits{MaxSteps: 20_000, MaxValueBytes: 1 << 16, MaxOutputBytes: 1 << 16, MaxValueItems: 1 << 12, MaxAllocBytes: 1 << 22}
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src, lim)
		if err != nil {
			if strings.Contains(err.Error(), "internal error") {
				t.Fatal(err)
			}
			return
		}
		out, st, err := tmpl.RenderStats(context.Background(), hostileVars())
		if err != nil && strings.Contains(err.Error(), "internal error") {
			t.Fatalf("%q: %v", src, err)
		}
		if st.Steps > lim.MaxSteps+1 || int64(len(out)) > lim.MaxOutputBytes {
			t.Fatalf("%q: over budget: %d steps, %d bytes", src, st.Steps, len(out))
		}
	})
}
