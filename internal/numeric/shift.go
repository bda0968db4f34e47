package numeric

// Shift sets dst[i] = (src[i] - m) - c for every entry of src, in float32 (each operation
// rounded to float32, as Go computes it): log-softmax's last pass. dst and src may be the same
// slice; dst must be at least as long as src.
func Shift(dst, src []float32, m, c float32) {
	dst = dst[:len(src)]
	n := shiftVector(dst, src, m, c)
	for i := n; i < len(src); i++ {
		dst[i] = (src[i] - m) - c
	}
}
