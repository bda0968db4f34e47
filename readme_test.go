package llamaloop_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llamaloop/llamaloop/cgo"
	"github.com/llamaloop/llamaloop/internal/testkit/asan"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeSteps returns the shell steps of README's "Using llamaloop from
// your Go module" and the three programs after them.
func readmeSteps(t *testing.T) (steps string, programs []string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(readme), "\n## Using llamaloop from your Go module\n")
	require.True(t, ok, "README has the section")
	section, _, _ = strings.Cut(section, "\n## ")
	blocks := strings.Split(section, "```")
	for i := 1; i < len(blocks); i += 2 {
		lang, body, _ := strings.Cut(blocks[i], "\n")
		switch {
		case lang == "sh" && steps == "":
			steps = body
		case lang == "go" && strings.HasPrefix(body, "package main\n"):
			programs = append(programs, body)
		}
	}
	require.NotEmpty(t, steps)
	require.Len(t, programs, 3, "README's three programs")
	return steps, programs
}

// README's steps, run verbatim in an empty directory (but for the clone,
// which clones this checkout's last commit instead of the URL), build and
// run its three programs from an outside module: the stream of a
// generation_config.json, beam search with 4 beams, and a chat answer
// under a JSON Schema. It needs git, make and a warm build cache (about a
// minute on 2 cores; llama.cpp is compiled only once per set of flags).
func TestReadmeOutsideModule(t *testing.T) {
	if testing.Short() || asan.Enabled {
		t.Skip("builds programs in an outside module (not in -short or -asan runs)")
	}
	if cgo.Engine != "module" {
		t.Skip("README's steps build the default engine; this binary has the external one")
	}
	for _, tool := range []string{"git", "make", "bash", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(repoRoot, ".git")); err != nil {
		t.Skip("the checkout is not a git clone")
	}
	steps, programs := readmeSteps(t)
	clone, rest, _ := strings.Cut(steps, "\n")
	require.True(t, strings.HasPrefix(clone, "git clone "), "the steps start with the clone: %q", clone)
	dir := t.TempDir()
	run := func(script, stdin string) string {
		t.Helper()
		cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+script)
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(stdin)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		require.NoError(t, cmd.Run(), "%s\nstderr:\n%s", script, errOut.String())
		return out.String()
	}
	// The steps paste program (a) at `cat > main.go` and end with go run.
	out := run(fmt.Sprintf("git clone -q %q llamaloop\n", repoRoot)+rest, programs[0])
	assert.Contains(t, out, " reads a prompt and returns new logits")

	dir = filepath.Join(dir, "hello")
	beams := run(`eval "$(make -s -C ../llamaloop env)"; cat > main.go; go build -o beam . && ./beam`, programs[1])
	lines := strings.Split(strings.TrimSpace(beams), "\n")
	assert.Len(t, lines, 4, "four hypotheses")
	for _, l := range lines {
		assert.Regexp(t, `^-\d+\.\d{3} `, l)
	}
	chat := run(`eval "$(make -s -C ../llamaloop env)"; cat > main.go; go build -o chat . && ./chat`, programs[2])
	assert.Contains(t, chat, `"answer"`)
}
