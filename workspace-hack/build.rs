// A build script, so that cargo unifies the build dependencies listed here too.
fn main() {}
