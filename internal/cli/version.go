package cli

import (
	"runtime/debug"
	"strings"

	"github.com/llamaloop/llamaloop/cgo"
)

// External reports a build against a llama.cpp installed with CMake (build
// tag llamacpp_external, make LLAMA_CPP=DIR) instead of the pinned module's:
// LlamaCppCommit and LlamaCppBuild do not describe it.
const External = cgo.Engine == "external"

// The llama.cpp that the pinned ollama module vendors.
const (
	LlamaCppCommit = "ec98e2002"
	LlamaCppBuild  = "b7416+21"
	llamaModule    = "github.com/ollama/ollama"
)

// Version describes the build of a command.
type Version struct {
	// Llamaloop is the module version, or the VCS revision ("+dirty" when
	// the tree had changes), or "devel".
	Llamaloop string `json:"llamaloop"`
	// LlamaCpp is the vendored llama.cpp commit and build number.
	LlamaCpp string `json:"llama_cpp"`
	// Module is the Go module that vendors llama.cpp, with its version.
	Module string `json:"llama_cpp_module"`
}

// BuildVersion reads the versions from the binary's build information.
func BuildVersion() Version {
	v := Version{Llamaloop: "devel", LlamaCpp: LlamaCppCommit + " (" + LlamaCppBuild + ")", Module: llamaModule}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if mv := info.Main.Version; mv != "" && mv != "(devel)" {
		v.Llamaloop = mv
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if v.Llamaloop == "devel" && rev != "" {
		v.Llamaloop = rev[:min(12, len(rev))]
		if dirty {
			v.Llamaloop += "+dirty"
		}
	}
	for _, d := range info.Deps {
		if d.Path == llamaModule {
			v.Module = d.Path + " " + d.Version
		}
	}
	if External {
		v.LlamaCpp, v.Module = "external", "a llama.cpp installed with CMake (make LLAMA_CPP=DIR)"
		if ev := cgo.EngineVersion(); ev != "" {
			v.LlamaCpp += " (llama_version " + ev + ")"
		}
	}
	return v
}

// String is the one-line form: "llamaloop X, llama.cpp Y (module M)".
func (v Version) String() string {
	return "llamaloop " + v.Llamaloop + ", llama.cpp " + v.LlamaCpp + " via " + strings.TrimSpace(v.Module)
}
