//! `make deps` on a fresh machine: its libclang probe
//! (`docker/probe-libclang.sh`) must find exactly the library bindgen loads
//! (through clang-sys) with the headers clang needs beside it, and nothing
//! else, or the build fails on a machine the probe called ready. Each case
//! builds a fake directory tree and runs the probe on it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first bytes of a shared library of the given ELF class (2: 64-bit).
fn elf(class: u8) -> Vec<u8> {
    let mut bytes = vec![0x7f, b'E', b'L', b'F', class, 1, 1, 0];
    bytes.resize(64, 0);
    bytes
}

/// An empty fake root under the system temp dir.
struct Tree(PathBuf);

impl Tree {
    fn new(tag: &str) -> Tree {
        let dir = std::env::temp_dir().join(format!(
            "rwlock-probe-{tag}-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the fake root");
        Tree(dir)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    fn file(&self, rel: &str, bytes: &[u8]) -> &Tree {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        fs::write(&path, bytes).expect("write a fake file");
        self
    }

    fn library(&self, rel: &str) -> &Tree {
        self.file(rel, &elf(2))
    }

    /// clang's resource headers for the library directory `libdir`.
    fn headers(&self, libdir: &str, version: &str) -> &Tree {
        self.file(
            &format!("{libdir}/clang/{version}/include/stddef.h"),
            b"/* */",
        )
    }

    fn link(&self, rel: &str, target: &str) -> &Tree {
        let path = self.path(rel);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        symlink(target, &path).expect("symlink");
        self
    }

    /// The probe's exit status and output, with `env` set and the
    /// library-path variables of this process cleared.
    fn probe_with(&self, env: &[(&str, &str)]) -> (bool, String) {
        let mut cmd = Command::new(repo().join("docker/probe-libclang.sh"));
        cmd.env("PROBE_ROOT", &self.0)
            .env_remove("LIBCLANG_PATH")
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("LIBRARY_PATH");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run the probe");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    fn probe(&self) -> (bool, String) {
        self.probe_with(&[])
    }

    /// The probe succeeds and names `rel` (inside the tree).
    fn finds(&self, rel: &str) {
        let (ok, out) = self.probe();
        assert!(ok, "the probe found nothing: {out}");
        assert_eq!(Path::new(out.trim()), self.path(rel), "{out}");
    }

    fn refuses(&self, env: &[(&str, &str)], why: &str) {
        let (ok, out) = self.probe_with(env);
        assert!(!ok, "the probe accepted a tree where {why}: {out}");
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn libclang_cpp_alone_is_not_libclang() {
    // What a fresh Debian machine with LLVM but no libclang-dev carries.
    let tree = Tree::new("cpp");
    tree.library("/usr/lib/llvm-14/lib/libclang-cpp.so.14")
        .link(
            "/usr/lib/x86_64-linux-gnu/libclang-cpp.so.14",
            "../llvm-14/lib/libclang-cpp.so.14",
        )
        .headers("/usr/lib/llvm-14/lib", "14.0.6");
    tree.refuses(&[], "only libclang-cpp is installed");
}

#[test]
fn libclang_with_its_headers_is_found() {
    // Debian's libclang1-14 and libclang-common-14-dev.
    let tree = Tree::new("debian");
    tree.library("/usr/lib/llvm-14/lib/libclang-14.so.14.0.6")
        .link(
            "/usr/lib/llvm-14/lib/libclang.so.1",
            "libclang-14.so.14.0.6",
        )
        .library("/usr/lib/llvm-14/lib/libclang-cpp.so.14")
        .headers("/usr/lib/llvm-14/lib", "14.0.6");
    let (ok, out) = tree.probe();
    assert!(ok, "{out}");
    assert!(
        out.trim().ends_with(".so.1") || out.trim().ends_with(".so.14.0.6"),
        "{out}"
    );
    assert!(!out.contains("-cpp"), "{out}");
}

#[test]
fn a_link_elsewhere_finds_headers_beside_its_target() {
    let tree = Tree::new("link");
    tree.library("/usr/lib/llvm-15/lib/libclang.so.1")
        .headers("/usr/lib/llvm-15/lib", "15.0.6")
        .link(
            "/usr/lib/x86_64-linux-gnu/libclang-15.so.1",
            "../llvm-15/lib/libclang.so.1",
        );
    tree.finds("/usr/lib/x86_64-linux-gnu/libclang-15.so.1");
}

#[test]
fn libclang_without_headers_is_not_enough() {
    // libclang1-14 alone: the library loads, but stddef.h is missing.
    let tree = Tree::new("noheaders");
    tree.library("/usr/lib/llvm-14/lib/libclang.so.1");
    tree.refuses(&[], "clang's headers are missing");
}

#[test]
fn a_32_bit_libclang_does_not_count() {
    let tree = Tree::new("elf32");
    tree.file("/usr/lib/libclang.so", &elf(1))
        .headers("/usr/lib", "14");
    tree.refuses(&[], "the only libclang is 32-bit");
}

#[test]
fn libclang_path_is_the_only_place_searched_when_set() {
    let tree = Tree::new("envpath");
    tree.library("/usr/lib/llvm-14/lib/libclang.so.1")
        .headers("/usr/lib/llvm-14/lib", "14.0.6")
        .file("/opt/empty/README", b"");
    tree.refuses(
        &[("LIBCLANG_PATH", "/opt/empty")],
        "LIBCLANG_PATH names a directory without libclang",
    );
    let (ok, out) = tree.probe_with(&[("LIBCLANG_PATH", "/usr/lib/llvm-14/lib")]);
    assert!(ok, "{out}");
}

#[test]
fn the_highest_version_is_the_one_bindgen_loads() {
    // clang-sys takes the highest version: its headers are the ones needed.
    let tree = Tree::new("versions");
    tree.library("/usr/lib/llvm-13/lib/libclang-13.so.1")
        .headers("/usr/lib/llvm-13/lib", "13.0.1")
        .library("/usr/lib/llvm-16/lib/libclang-16.so.1");
    tree.refuses(&[], "the highest version has no headers");
    tree.headers("/usr/lib/llvm-16/lib", "16.0.6");
    tree.finds("/usr/lib/llvm-16/lib/libclang-16.so.1");
}

#[test]
fn make_deps_installs_libclang_when_the_probe_finds_none() {
    let makefile = fs::read_to_string(repo().join("Makefile")).expect("read the Makefile");
    assert!(
        makefile.contains("docker/probe-libclang.sh"),
        "make deps must decide by the probe"
    );
    assert!(
        !makefile.contains("libclang*.so"),
        "make deps must not glob for libclang*, which matches libclang-cpp"
    );
}

#[test]
fn the_probe_finds_the_libclang_this_build_used() {
    // This test binary was built, so bindgen found a libclang here: the
    // probe, run on the real machine, must find one too.
    let out = Command::new(repo().join("docker/probe-libclang.sh"))
        .output()
        .expect("run the probe");
    assert!(
        out.status.success(),
        "the probe finds no libclang on the machine that built the module: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
