//! uniffi's bindings generator, built from the same uniffi version as the
//! library (scripts/test-jvm.sh runs it in library mode on the built `.so`).

fn main() {
    uniffi::uniffi_bindgen_main()
}
