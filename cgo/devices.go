package cgo

/*
#include "shim.h"
*/
import "C"

import (
	"unsafe"
)

// Device is a ggml_backend_dev_t.
type Device struct{ c C.ggml_backend_dev_t }

// Device types of ggml_backend_dev_type.
const (
	DeviceCPU   = int(C.GGML_BACKEND_DEVICE_TYPE_CPU)
	DeviceGPU   = int(C.GGML_BACKEND_DEVICE_TYPE_GPU)
	DeviceIGPU  = int(C.GGML_BACKEND_DEVICE_TYPE_IGPU)
	DeviceAccel = int(C.GGML_BACKEND_DEVICE_TYPE_ACCEL)
)

// DeviceCount is ggml_backend_dev_count.
func DeviceCount() int { return int(C.ggml_backend_dev_count()) }

// DeviceGet is ggml_backend_dev_get.
func DeviceGet(i int) Device { return Device{C.ggml_backend_dev_get(C.size_t(i))} }

// Name is ggml_backend_dev_name.
func (d Device) Name() string { return C.GoString(C.ggml_backend_dev_name(d.c)) }

// Description is ggml_backend_dev_description.
func (d Device) Description() string { return C.GoString(C.ggml_backend_dev_description(d.c)) }

// Type is ggml_backend_dev_type.
func (d Device) Type() int { return int(C.ggml_backend_dev_type(d.c)) }

// Memory is ggml_backend_dev_memory.
func (d Device) Memory() (free, total uint64) {
	var f, t C.size_t
	C.ggml_backend_dev_memory(d.c, &f, &t)
	return uint64(f), uint64(t)
}

// BackendLoad is ggml_backend_load; it reports whether a backend registered.
func BackendLoad(path string) (Registry, bool) {
	cs := C.CString(path)
	defer C.free(unsafe.Pointer(cs))
	r := C.ggml_backend_load(cs)
	return Registry{r}, r != nil
}

// Registry is a ggml_backend_reg_t: one backend and its devices.
type Registry struct{ c C.ggml_backend_reg_t }

// Registry is ggml_backend_dev_backend_reg.
func (d Device) Registry() Registry { return Registry{C.ggml_backend_dev_backend_reg(d.c)} }

// BuiltinCPURegistry is ggml_backend_cpu_reg of the CPU backend compiled into
// the program (the one the cgo flags built).
func BuiltinCPURegistry() Registry { return Registry{C.ggml_backend_cpu_reg()} }

// Unload is ggml_backend_unload: it removes the backend and its devices from
// ggml's registry and closes its library. Only for a backend loaded from a
// library that nothing uses yet.
func (r Registry) Unload() { C.ggml_backend_unload(r.c) }
