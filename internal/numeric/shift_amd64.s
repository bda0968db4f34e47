//go:build amd64 && !purego

#include "textflag.h"

// func shiftAVX2(dst, src *float32, groups int, m, c float32)
TEXT ·shiftAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ groups+16(FP), CX
	VBROADCASTSS m+24(FP), Y1
	VBROADCASTSS c+28(FP), Y2

loop:
	VMOVUPS (SI), Y0
	VSUBPS Y1, Y0, Y0
	VSUBPS Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  loop
	VZEROUPPER
	RET
