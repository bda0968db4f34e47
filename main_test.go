package llamaloop_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/testmodel"
)

// repoRoot is the checkout's root, the working directory before TestMain
// moves into the examples' directory.
var repoRoot string

// TestMain runs the tests and examples in a directory holding model.gguf
// (the demo model) and generation_config.json, so that the examples read
// as a program would.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if repoRoot, err = os.Getwd(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "llamaloop-examples")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := writeExampleFiles(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.Chdir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// writeExampleFiles writes the demo model as model.gguf and a greedy
// generation_config.json of 16 new tokens into dir.
func writeExampleFiles(dir string) error {
	demo, err := testmodel.NewDemo()
	if err != nil {
		return err
	}
	if err := demo.Write(filepath.Join(dir, "model.gguf")); err != nil {
		return err
	}
	cfg := `{"bos_token_id": 1, "eos_token_id": 2, "do_sample": false, "max_new_tokens": 16}`
	return os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(cfg), 0o644)
}
