//! The committed `include/fencelock.h` must be what cbindgen makes of the
//! code now, with version macros that match this crate's version.

use std::path::Path;

fn version_macros() -> String {
    let version = env!("CARGO_PKG_VERSION");
    let [major, minor, patch] = [
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
    ];
    format!(
        "\n/* The version of this header; fencelock_version() gives the library's. */\n\
         #define FENCELOCK_VERSION \"{version}\"\n\
         #define FENCELOCK_VERSION_MAJOR {major}\n\
         #define FENCELOCK_VERSION_MINOR {minor}\n\
         #define FENCELOCK_VERSION_PATCH {patch}\n"
    )
}

fn generate() -> String {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("read ffi/cbindgen.toml");
    config.after_includes = Some(version_macros());
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen could not generate the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("cbindgen writes UTF-8")
}

#[test]
fn committed_header_matches_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../include/fencelock.h");
    let generated = generate();
    if std::env::var_os("FENCELOCK_UPDATE_HEADER").is_some() {
        std::fs::write(&path, &generated).expect("write include/fencelock.h");
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/fencelock.h is out of date with ffi/src (or was edited by hand). Regenerate it with\n  \
         FENCELOCK_UPDATE_HEADER=1 cargo test -p fencelock-ffi --test header\nand commit the result."
    );
}

#[test]
fn header_declares_the_version_of_this_crate() {
    let header = generate();
    let line = format!("#define FENCELOCK_VERSION \"{}\"", env!("CARGO_PKG_VERSION"));
    assert!(header.contains(&line), "missing `{line}`");
}
