package numeric

// Shift sets dst[i] = (src[i] - m) - c for every entry of src, in float32 (each operation
// rounded to float32, as Go computes it): log-softmax's last pass. dst and src may be the same
// slice; dst must be at least as long as src. Like the scans, it takes the whole groups of 8
// entries with AVX2 where the machine has it.
func Shift(dst, src []float32, m, c float32) {
	dst = dst[:len(src)]
	n := scanLen(len(src))
	if n > 0 {
		shiftAVX2(&dst[0], &src[0], n/8, m, c)
	}
	for i := n; i < len(src); i++ {
		dst[i] = (src[i] - m) - c
	}
}
