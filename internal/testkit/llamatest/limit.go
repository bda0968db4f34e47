package llamatest

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/llamaloop/llamaloop/internal/testkit/asan"
)

// limitEnv marks the child process of UnderAddressLimit.
const limitEnv = "LLAMALOOP_TEST_ADDRESS_LIMIT"

// UnderAddressLimit runs the calling test again in a child process whose
// address space may grow by only extra bytes beyond what it has mapped when
// the test starts (RLIMIT_AS), so that large allocations fail as they do
// under a memory limit, without touching this process. In the child it sets
// the limit and returns true: the test body follows. In the parent it runs
// the child, fails the test with the child's output when the child fails,
// and returns false. It skips outside Linux and under -asan (whose shadow
// memory needs terabytes of address space).
func UnderAddressLimit(t *testing.T, extra uint64) bool {
	t.Helper()
	if runtime.GOOS != "linux" || asan.Enabled {
		t.Skip("address-space limits need Linux without -asan")
	}
	if os.Getenv(limitEnv) == t.Name() {
		data, err := os.ReadFile("/proc/self/statm")
		if err != nil {
			t.Fatal(err)
		}
		pages, err := strconv.ParseUint(strings.Fields(string(data))[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		limit := pages*uint64(os.Getpagesize()) + extra
		if err := syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: limit, Max: limit}); err != nil {
			t.Fatal(err)
		}
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+strings.ReplaceAll(t.Name(), "/", "$/^")+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), limitEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child under an address-space limit failed (%v):\n%s", err, out)
	}
	return false
}
