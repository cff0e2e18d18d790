package fencelock

// The link to libfencelock, the C ABI of the Rust core, as wasmtime-go and
// valkey-glide link theirs: a prebuilt static library per platform inside
// the module (lib/GOOS-GOARCH/libfencelock.a) and the header beside them
// (lib/include/fencelock.h). build-lib.sh builds and copies both from the
// repository's release build; they are not committed. The extra libraries
// are what the Rust staticlib needs (cargo rustc -p fencelock-ffi --release
// -- --print native-static-libs).

/*
#cgo CFLAGS: -std=gnu11 -I${SRCDIR} -I${SRCDIR}/lib/include
#cgo linux,amd64 LDFLAGS: ${SRCDIR}/lib/linux-amd64/libfencelock.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
#cgo linux,arm64 LDFLAGS: ${SRCDIR}/lib/linux-arm64/libfencelock.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
#include "shim.h"
*/
import "C"

import "unsafe"

// cString copies s into C memory; the caller frees it with freeCString.
// s was checked by checkString.
func cString(s string) *C.char { return C.CString(s) }

func freeCString(s *C.char) { C.free(unsafe.Pointer(s)) }
