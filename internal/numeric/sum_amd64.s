//go:build amd64 && !purego

#include "textflag.h"

// Offsets of the constants in expVecConsts (32 bytes each).
#define INV 0
#define SH 32
#define MASK 64
#define C3 96
#define C2 128
#define C1 160
#define ONE 192
#define FLOOR 224
#define CLAMP 256
#define NEGINF 288
#define ZERO 320

// EXPTERM computes the terms of the 4 entries at off(SI) into E as addLanesGo does, unclamped,
// and in MASK the lanes that need the clamp (d < ExpFloor, -Inf included): d = x - m,
// u = d*inv, kf = u + sh, f = u - (kf - sh), scale from the table and kf's bits,
// e = scale * (1 + f*(c1 + f*(c2 + f*c3))). Y2 keeps d. Y11 holds all ones.
#define EXPTERM(off, E, MASK) \
	VCVTPS2PD off(SI), Y2 \
	VSUBPD Y15, Y2, Y2 \
	VMULPD Y14, Y2, Y3 \
	VADDPD Y13, Y3, Y4 \
	VSUBPD Y13, Y4, Y5 \
	VSUBPD Y5, Y3, Y3 \
	VPAND Y12, Y4, Y5 \
	VMOVDQA Y11, Y6 \
	VPGATHERQQ Y6, (AX)(Y5*8), E \
	VPSLLQ $42, Y4, Y4 \
	VPADDQ Y4, E, E \
	VMULPD C3(R8), Y3, Y4 \
	VADDPD C2(R8), Y4, Y4 \
	VMULPD Y3, Y4, Y4 \
	VADDPD C1(R8), Y4, Y4 \
	VMULPD Y3, Y4, Y4 \
	VADDPD ONE(R8), Y4, Y4 \
	VMULPD Y4, E, E \
	VCMPPD $0x11, FLOOR(R8), Y2, MASK

// CLAMPED applies Term's clamp to the terms E of the entries at off(SI), MASK the lanes below
// ExpFloor: e^ExpFloor, or 0 for -Inf.
#define CLAMPED(off, E, MASK) \
	VCVTPS2PD off(SI), Y2 \
	VSUBPD Y15, Y2, Y2 \
	VBLENDVPD MASK, CLAMP(R8), E, E \
	VCMPPD $0x00, NEGINF(R8), Y2, Y3 \
	VBLENDVPD Y3, ZERO(R8), E, E

// func expLanesAVX2(row *float32, groups int, m float64, l *lanes, consts *[12][4]uint64, table *[ExpTableSize]uint64)
TEXT ·expLanesAVX2(SB), NOSPLIT, $0-48
	MOVQ row+0(FP), SI
	MOVQ groups+8(FP), CX
	MOVQ l+24(FP), DI
	MOVQ consts+32(FP), R8
	MOVQ table+40(FP), AX
	VBROADCASTSD m+16(FP), Y15
	VMOVUPD INV(R8), Y14
	VMOVUPD SH(R8), Y13
	VMOVDQU MASK(R8), Y12
	VPCMPEQQ Y11, Y11, Y11
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1

loop:
	EXPTERM(0, Y7, Y8)
	EXPTERM(16, Y9, Y10)
	VORPD Y10, Y8, Y3
	VMOVMSKPD Y3, BX
	TESTL BX, BX
	JNZ  clamp

add:
	VADDPD Y7, Y0, Y0
	VADDPD Y9, Y1, Y1
	ADDQ $32, SI
	DECQ CX
	JNZ  loop

	VMOVUPD Y0, (DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

clamp: // rare: a masked entry, or one far below the largest
	CLAMPED(0, Y7, Y8)
	CLAMPED(16, Y9, Y10)
	JMP  add
