"""Writes a Go module zip and a module proxy tree holding it.

    python3 go_module_zip.py MODULE_DIR MODULE_PATH VERSION ZIP_OUT PROXY_DIR

The zip follows the format `go mod download` checks
(https://go.dev/ref/mod#zip-files): every entry is MODULE_PATH@VERSION/FILE,
regular files only, no nested module. The proxy tree is what a GOPROXY serves
(https://go.dev/ref/mod#goproxy-protocol): @v/list, VERSION.info, VERSION.mod
and VERSION.zip under the module path, so GOPROXY=file://PROXY_DIR works.
"""

import json
import shutil
import sys
import zipfile
from datetime import datetime, timezone
from pathlib import Path

# Fixed entry times keep the zip's bytes (and its checksum) the same for the
# same files.
ZIP_TIME = (2024, 1, 1, 0, 0, 0)


def module_files(module_dir: Path) -> list:
    files = sorted(p for p in module_dir.rglob("*") if p.is_file() or p.is_symlink())
    for path in files:
        if path.is_symlink():
            sys.exit(f"go module zip: {path} is a symlink; Go refuses them in module zips")
        if path.name == "go.mod" and path.parent != module_dir:
            sys.exit(f"go module zip: {path} is a nested module; Go leaves it out of this one")
    return files


def write_zip(module_dir: Path, module: str, version: str, out: Path) -> None:
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in module_files(module_dir):
            entry = zipfile.ZipInfo(f"{module}@{version}/{path.relative_to(module_dir).as_posix()}", ZIP_TIME)
            entry.compress_type = zipfile.ZIP_DEFLATED
            entry.external_attr = 0o644 << 16
            archive.writestr(entry, path.read_bytes())


def write_proxy(module_dir: Path, module: str, version: str, zip_path: Path, proxy: Path) -> None:
    # Module paths with upper-case letters are escaped ("!x"); ours has none.
    if module != module.lower():
        sys.exit(f"go module zip: {module} has upper-case letters, which this tree does not escape")
    versions = proxy / module / "@v"
    versions.mkdir(parents=True, exist_ok=True)
    (versions / "list").write_text(f"{version}\n", encoding="utf-8")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    (versions / f"{version}.info").write_text(json.dumps({"Version": version, "Time": stamp}) + "\n", encoding="utf-8")
    shutil.copyfile(module_dir / "go.mod", versions / f"{version}.mod")
    shutil.copyfile(zip_path, versions / f"{version}.zip")


def main() -> None:
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    module_dir, module, version, zip_out, proxy = sys.argv[1:]
    write_zip(Path(module_dir), module, version, Path(zip_out))
    write_proxy(Path(module_dir), module, version, Path(zip_out), Path(proxy))


if __name__ == "__main__":
    main()
