package cli

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Group is a titled list of options in the order the help shows them. An
// entry names a flag; "m,model" names two spellings of one option.
type Group struct {
	Title string
	Flags []string
}

// CommonFlags defines the options every command has: --version, and -h and
// --help.
func CommonFlags(fs *flag.FlagSet, version, help *bool) {
	fs.BoolVar(version, "version", false, "print the versions of llamaloop and llama.cpp and exit")
	fs.BoolVar(help, "h", false, "show this help")
	fs.BoolVar(help, "help", false, "show this help")
}

// Parse parses a command's args with fs, whose -h and --help set *help.
// A bad option is a UsageError (FlagError); a request for help prints the
// usage to out (PrintUsage with head and groups) and returns flag.ErrHelp.
func Parse(fs *flag.FlagSet, args []string, help *bool, out io.Writer, head string, groups []Group) error {
	if err := fs.Parse(args); err != nil {
		return FlagError(fs, err)
	}
	if *help {
		PrintUsage(out, fs, head, groups)
		return flag.ErrHelp
	}
	return nil
}

// PrintUsage writes head, then every flag of fs under its group with its
// usage text and its default, and flags that no group lists under
// "Other options". Every option shows a default: "none" when its
// default is empty.
func PrintUsage(w io.Writer, fs *flag.FlagSet, head string, groups []Group) {
	fmt.Fprint(w, head)
	seen := map[string]bool{}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.Title)
		for _, entry := range g.Flags {
			names := strings.Split(entry, ",")
			for _, n := range names {
				seen[n] = true
			}
			printFlag(w, fs, names)
		}
	}
	var rest []string
	fs.VisitAll(func(f *flag.Flag) {
		if !seen[f.Name] {
			rest = append(rest, f.Name)
		}
	})
	if len(rest) > 0 {
		slices.Sort(rest)
		fmt.Fprintf(w, "\nOther options:\n")
		for _, n := range rest {
			printFlag(w, fs, []string{n})
		}
	}
}

func printFlag(w io.Writer, fs *flag.FlagSet, names []string) {
	f := fs.Lookup(names[0])
	if f == nil {
		return
	}
	arg, usage := flag.UnquoteUsage(f)
	if isBool(f) {
		arg = ""
	}
	var spelled []string
	for _, n := range names {
		spelled = append(spelled, dashes(n))
	}
	left := "  " + strings.Join(spelled, ", ")
	if arg != "" {
		left += " " + arg
	}
	def := f.DefValue
	if def == "" {
		def = "none"
	}
	text := fmt.Sprintf("%s (default: %s)", usage, def)
	if len(left) >= 28 {
		fmt.Fprintf(w, "%s\n%28s%s\n", left, "", wrap(text, 28))
		return
	}
	fmt.Fprintf(w, "%-28s%s\n", left, wrap(text, 28))
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// wrap breaks text into lines of at most 100-indent characters, indenting
// continuation lines by indent spaces.
func wrap(text string, indent int) string {
	width := max(100-indent, 40)
	var b strings.Builder
	n := 0
	for i, word := range strings.Fields(text) {
		if i > 0 {
			if n+1+len(word) > width {
				b.WriteString("\n" + strings.Repeat(" ", indent))
				n = 0
			} else {
				b.WriteByte(' ')
				n++
			}
		}
		b.WriteString(word)
		n += len(word)
	}
	return b.String()
}
