package replay

// CPUTime is cpuTime for the benchmarks of package replay_test.
var CPUTime = cpuTime
