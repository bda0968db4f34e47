package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDefaultThreads(t *testing.T) {
	cases := []struct {
		m    Machine
		want int
		note string
	}{
		{Machine{CPUs: 16, Cores: 8, Load: 0.3, LoadKnown: true}, 8, ""},
		{Machine{CPUs: 16, Cores: 8, Load: 12.2, LoadKnown: true}, 4, "4 threads, not 8: the load average 12.2 leaves 4 of 16 CPUs free"},
		{Machine{CPUs: 2, Cores: 2, Load: 21.6, LoadKnown: true}, 1, "1 thread, not 2: the load average 21.6 leaves 0 of 2 CPUs free"},
		{Machine{CPUs: 2, Cores: 2, Load: 0.6, LoadKnown: true}, 1, "1 thread, not 2: the load average 0.6 leaves 1 of 2 CPUs free"},
		{Machine{CPUs: 2, Cores: 2, Load: 0.4, LoadKnown: true}, 2, ""},
		{Machine{CPUs: 8, Cores: 8, Load: 50}, 8, ""}, // no load average: the cores
	}
	for _, c := range cases {
		n, note := c.m.DefaultThreads()
		assert.Equal(t, c.want, n, "%+v", c.m)
		if c.note == "" {
			assert.Empty(t, note)
		} else {
			assert.Contains(t, note, c.note)
		}
	}
}

func TestBusyWarning(t *testing.T) {
	busy := Machine{CPUs: 2, Cores: 2, Load: 21.6, LoadKnown: true}
	assert.Empty(t, busy.BusyWarning(1))
	assert.Contains(t, busy.BusyWarning(2), "--threads 2, and the load average 21.6 leaves 0 of 2 CPUs free")
	quiet := Machine{CPUs: 16, Cores: 8, Load: 1, LoadKnown: true}
	assert.Empty(t, quiet.BusyWarning(8))
	assert.Empty(t, Machine{CPUs: 2, Cores: 2}.BusyWarning(2))
}

// TestPhysicalCores reads a sysfs of 2 packages of 2 cores of 2 threads.
func TestPhysicalCores(t *testing.T) {
	dir := t.TempDir()
	for cpu := range 8 {
		d := filepath.Join(dir, "cpu"+strconv.Itoa(cpu), "topology")
		require.NoError(t, os.MkdirAll(d, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d, "physical_package_id"), []byte(strconv.Itoa(cpu/4)+"\n"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d, "core_id"), []byte(strconv.Itoa(cpu%4/2)+"\n"), 0o644))
	}
	assert.Equal(t, 4, physicalCores(dir, 8))
	assert.Equal(t, 2, physicalCores(dir, 4)) // an affinity mask of half the CPUs
	assert.Equal(t, 3, physicalCores(t.TempDir(), 3))
	load, ok := parseLoad("21.18 18.55 11.82 20/255 16794\n")
	assert.True(t, ok)
	assert.InDelta(t, 21.18, load, 1e-9)
}
