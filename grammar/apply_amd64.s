//go:build amd64 && !purego

#include "textflag.h"

// The bit of each of 8 lanes.
DATA lanebits<>+0(SB)/4, $1
DATA lanebits<>+4(SB)/4, $2
DATA lanebits<>+8(SB)/4, $4
DATA lanebits<>+12(SB)/4, $8
DATA lanebits<>+16(SB)/4, $16
DATA lanebits<>+20(SB)/4, $32
DATA lanebits<>+24(SB)/4, $64
DATA lanebits<>+28(SB)/4, $128
GLOBL lanebits<>(SB), RODATA|NOPTR, $32

DATA neginf<>+0(SB)/4, $0xff800000
GLOBL neginf<>(SB), RODATA|NOPTR, $4

// func maskAVX2(row *float32, allowed *byte, groups int)
TEXT ·maskAVX2(SB), NOSPLIT, $0-24
	MOVQ row+0(FP), DI
	MOVQ allowed+8(FP), SI
	MOVQ groups+16(FP), CX
	TESTQ CX, CX
	JZ   done
	VBROADCASTSS neginf<>(SB), Y1
	VMOVDQU lanebits<>(SB), Y2

loop:
	MOVBLZX (SI), AX
	CMPL AX, $0xff
	JEQ  next           // 8 allowed: nothing to do
	TESTL AX, AX
	JZ   blocked        // 8 blocked: store -inf without reading
	VMOVD AX, X3
	VPBROADCASTD X3, Y3
	VPAND Y2, Y3, Y3
	VPCMPEQD Y2, Y3, Y3 // lanes whose bit is set: all ones
	VMOVUPS (DI), Y4
	VBLENDVPS Y3, Y4, Y1, Y4 // allowed lanes keep the score, the others -inf
	VMOVUPS Y4, (DI)
	JMP  next

blocked:
	VMOVUPS Y1, (DI)

next:
	ADDQ $32, DI
	INCQ SI
	DECQ CX
	JNZ  loop
	VZEROUPPER

done:
	RET
