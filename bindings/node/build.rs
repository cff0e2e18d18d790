//! Link settings for a Node addon (napi-rs).

fn main() {
    napi_build::setup();
}
