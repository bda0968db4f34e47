package llamacpp_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// contextImmutable are the Context fields set at creation and never
// written again, which a method may read without the context's lock.
var contextImmutable = map[string]bool{
	"model": true, "nVocab": true, "nCtx": true, "nCtxSeq": true, "nBatch": true, "nUbatch": true,
	"nSeq": true, "unified": true, "invariant": true, "pooling": true,
}

// The rule on Context (its doc): every exported method that reaches
// llama.cpp's context or the last evaluation's state takes the context's
// lock. Read from the sources: an exported method of *Context that does
// not call ctx.mu.Lock may only read the fields fixed at creation and call
// other exported methods (which obey the rule themselves), so that a new
// method that forgets the lock fails here.
func TestContextMethodsHoldTheLock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var locked, unlocked []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		require.NoError(t, err)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv == nil || !fn.Name.IsExported() || fn.Body == nil {
				continue
			}
			star, ok := fn.Recv.List[0].Type.(*ast.StarExpr)
			if !ok || star.X.(*ast.Ident).Name != "Context" || len(fn.Recv.List[0].Names) == 0 {
				continue
			}
			recv := fn.Recv.List[0].Names[0].Name
			if callsLock(fn.Body, recv) {
				locked = append(locked, fn.Name.Name)
				continue
			}
			unlocked = append(unlocked, fn.Name.Name)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == recv {
					name := sel.Sel.Name
					assert.True(t, contextImmutable[name] || ast.IsExported(name),
						"%s: Context.%s reads %s.%s without the context's lock", fset.Position(sel.Pos()), fn.Name.Name, recv, name)
				}
				return true
			})
		}
	}
	sort.Strings(locked)
	sort.Strings(unlocked)
	t.Logf("take the lock: %s", strings.Join(locked, ", "))
	t.Logf("without it: %s", strings.Join(unlocked, ", "))
	for _, m := range []string{"Encode", "Decode", "Logits", "SeqRemove", "SeqState", "SetSeqState", "ClearCache", "Embed", "EmbedTokens", "Close"} {
		assert.Contains(t, locked, m)
	}
}

// callsLock reports whether body calls recv.mu.Lock().
func callsLock(body *ast.BlockStmt, recv string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return !found
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Lock" {
			if mu, ok := sel.X.(*ast.SelectorExpr); ok && mu.Sel.Name == "mu" {
				if id, ok := mu.X.(*ast.Ident); ok && id.Name == recv {
					found = true
				}
			}
		}
		return !found
	})
	return found
}
