//! The shell's layers stay one-way: no file of `src/` (nor of the Rust
//! client's `clients/rust/src/`) imports, directly or through others, a
//! file that imports it back. A file imports another when
//! it names an item of that file's module by path (`crate::…`, `super::…`,
//! `self::…`, or a child module by its bare name), in a `use` or inline.
//! Declaring a child module (`mod x;`) is not an import, and inline
//! modules (the unit tests' `mod tests { … }`) are no part of the layers.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every `.rs` file under `dir`, with its module path.
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut module: Module = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if matches!(module.last().map(String::as_str), Some("mod" | "lib")) {
                module.pop();
            }
            out.insert(module, path);
        }
    }
    out
}

/// The code of a file without comments and string literals, which may
/// mention paths that are no imports.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    match c {
                        '\\' if !escaped => escaped = true,
                        '"' if !escaped => break,
                        _ => escaped = false,
                    }
                }
                out.push_str("\"\"");
            }
            // A char literal such as '"' or '{' (lifetimes pass through).
            '\'' => {
                let rest: String = chars.clone().take(3).collect();
                if rest.starts_with('\\') {
                    for c in chars.by_ref() {
                        if c == '\'' {
                            break;
                        }
                    }
                } else if rest.chars().nth(1) == Some('\'') {
                    chars.next();
                    chars.next();
                } else {
                    out.push(c);
                }
            }
            _ => out.push(c),
        }
    }
    out
}

/// The code without `mod name { … }` blocks.
fn without_inline_modules(code: &str) -> String {
    let tokens = tokenize(code);
    let mut kept = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "mod" && tokens.get(i + 2).map(String::as_str) == Some("{") {
            let mut depth = 0;
            i += 2;
            while i < tokens.len() {
                match tokens[i].as_str() {
                    "{" => depth += 1,
                    "}" => depth -= 1,
                    _ => {}
                }
                i += 1;
                if depth == 0 {
                    break;
                }
            }
        } else {
            kept.push(tokens[i].clone());
            i += 1;
        }
    }
    kept.join(" ")
}

/// Every path the code names, `use` trees expanded: `crate::{a, b::c}`
/// gives `crate::a` and `crate::b::c`.
fn paths(code: &str) -> Vec<Vec<String>> {
    let tokens = tokenize(code);
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if is_ident(&tokens[i]) && (i == 0 || tokens[i - 1] != "::") {
            i = path_at(&tokens, i, Vec::new(), &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// Reads the path starting at `i` (after `prefix`) into `out`; returns the
/// index after it.
fn path_at(
    tokens: &[String],
    mut i: usize,
    prefix: Vec<String>,
    out: &mut Vec<Vec<String>>,
) -> usize {
    let mut path = prefix;
    path.push(tokens[i].clone());
    i += 1;
    while i + 1 < tokens.len() && tokens[i] == "::" {
        if tokens[i + 1] == "{" {
            i += 2;
            while i < tokens.len() && tokens[i] != "}" {
                if is_ident(&tokens[i]) {
                    i = path_at(tokens, i, path.clone(), out);
                } else {
                    i += 1;
                }
            }
            return i + 1;
        }
        if !is_ident(&tokens[i + 1]) {
            break;
        }
        path.push(tokens[i + 1].clone());
        i += 2;
    }
    if path.len() > 1 {
        out.push(path);
    }
    i
}

fn is_ident(t: &str) -> bool {
    t.chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

fn tokenize(code: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = code.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' {
                    word.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            tokens.push(word);
        } else if c == ':' {
            chars.next();
            if chars.peek() == Some(&':') {
                chars.next();
                tokens.push("::".into());
            } else {
                tokens.push(":".into());
            }
        } else if c.is_whitespace() {
            chars.next();
        } else {
            tokens.push(c.to_string());
            chars.next();
        }
    }
    tokens
}

/// The module of `files` that `path`, named in `module`, refers to: the
/// deepest module along it. None for paths outside the crate.
fn resolve(files: &BTreeMap<Module, PathBuf>, module: &Module, path: &[String]) -> Option<Module> {
    let (mut at, rest): (Module, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (module.clone(), &path[1..]),
        "super" => {
            let mut at = module.clone();
            let mut rest = path;
            while rest.first().map(String::as_str) == Some("super") {
                at.pop();
                rest = &rest[1..];
            }
            (at, rest)
        }
        _ => {
            let mut child = module.clone();
            child.push(path[0].clone());
            if !files.contains_key(&child) {
                return None;
            }
            (child, &path[1..])
        }
    };
    for segment in rest {
        let mut next = at.clone();
        next.push(segment.clone());
        if !files.contains_key(&next) {
            break;
        }
        at = next;
    }
    Some(at)
}

/// Which file imports which.
fn graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let files = modules(src);
    let mut graph = BTreeMap::new();
    for (module, path) in &files {
        let text = fs::read_to_string(path).expect("read a source file");
        let edges: BTreeSet<Module> = paths(&without_inline_modules(&code(&text)))
            .iter()
            .filter_map(|p| resolve(&files, module, p))
            .filter(|target| target != module)
            .collect();
        graph.insert(module.clone(), edges);
    }
    graph
}

/// A cycle of the graph, if it has one.
fn cycle(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Option<Vec<Module>> {
    fn visit(
        graph: &BTreeMap<Module, BTreeSet<Module>>,
        node: &Module,
        stack: &mut Vec<Module>,
        done: &mut BTreeSet<Module>,
    ) -> Option<Vec<Module>> {
        if let Some(at) = stack.iter().position(|m| m == node) {
            let mut found = stack[at..].to_vec();
            found.push(node.clone());
            return Some(found);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.clone());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(found) = visit(graph, next, stack, done) {
                return Some(found);
            }
        }
        stack.pop();
        done.insert(node.clone());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|node| visit(graph, node, &mut Vec::new(), &mut done))
}

/// Every file on some circle: those that reach a file that reaches them
/// back, so that one failure names every tangle, not only the first.
fn tangled(graph: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeSet<Module> {
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(node) = stack.pop() {
            for next in graph.get(&node).into_iter().flatten() {
                if seen.insert(next.clone()) {
                    stack.push(next.clone());
                }
            }
        }
        seen
    };
    graph
        .keys()
        .filter(|node| reach(node).contains(*node))
        .cloned()
        .collect()
}

fn shown(cycle: &[Module]) -> String {
    cycle
        .iter()
        .map(|m| format!("crate::{}", m.join("::")))
        .collect::<Vec<_>>()
        .join(" -> ")
}

/// A scratch `src/` holding `files` (path, text).
fn scratch(tag: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rwlock-layering-{tag}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    for (path, text) in files {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().expect("a parent")).expect("create dirs");
        fs::write(path, text).expect("write");
    }
    dir
}

/// Fails naming a circle when a file of the crate whose source root is
/// `src` imports, directly or through others, a file that imports it
/// back; `at_least` files must be read (a wrong path reads none).
fn check_layers(src: &Path, at_least: usize) {
    let graph = graph(src);
    assert!(
        graph.len() >= at_least,
        "read only {} files of {}",
        graph.len(),
        src.display()
    );
    if let Some(found) = cycle(&graph) {
        let all: Vec<Module> = tangled(&graph).into_iter().collect();
        panic!(
            "an import circle in {}: {} (every file on a circle: {})",
            src.display(),
            shown(&found),
            shown(&all).replace(" -> ", ", ")
        );
    }
}

#[test]
fn no_file_of_src_imports_a_file_that_imports_it_back() {
    check_layers(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), 21);
}

/// The graph between the top-level modules of `src` (a folder and the files
/// in it count as one: `waiting/clients.rs` is `waiting`), the crate root
/// left out: it declares them all.
fn folders(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let top = |m: &Module| m.iter().take(1).cloned().collect::<Module>();
    let mut tops: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (from, to) in graph(src) {
        let from = top(&from);
        if from.is_empty() {
            continue;
        }
        let edges = tops.entry(from.clone()).or_default();
        edges.extend(to.iter().map(top).filter(|t| !t.is_empty() && *t != from));
    }
    tops
}

#[test]
fn no_folder_of_src_reaches_a_folder_that_reaches_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let graph = folders(&src);
    assert!(
        graph.len() >= 10,
        "read only {} top-level modules",
        graph.len()
    );
    if let Some(found) = cycle(&graph) {
        panic!(
            "a loop between top-level modules of src/: {}",
            shown(&found)
        );
    }
}

#[test]
fn no_file_of_the_rust_client_imports_a_file_that_imports_it_back() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients/rust/src");
    check_layers(&src, 15);
}

#[test]
#[should_panic(expected = "an import circle in")]
fn the_check_of_a_source_root_fails_on_its_circle() {
    let dir = scratch(
        "root",
        &[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::x; pub fn y() {}"),
            ("b.rs", "pub fn x() { crate::a::y(); }"),
        ],
    );
    check_layers(&dir, 3);
}

#[test]
fn the_folder_check_sees_a_loop_no_file_circle_shows() {
    // w::close -> s and s -> w::clients: no file imports one that imports it
    // back, but the folder w and the file s reach each other (the shape
    // sessions/close.rs and waiting had).
    let dir = scratch(
        "folders",
        &[
            ("lib.rs", "mod s; mod w;"),
            ("s.rs", "use crate::w::clients::serve; pub fn settle() {}"),
            ("w/mod.rs", "pub mod clients; pub mod close;"),
            ("w/clients.rs", "pub fn serve() {}"),
            ("w/close.rs", "fn f() { crate::s::settle(); }"),
        ],
    );
    assert!(cycle(&graph(&dir)).is_none(), "no circle between files");
    let found = cycle(&folders(&dir)).expect("a loop between folders");
    assert_eq!(
        shown(&found).matches(" -> ").count(),
        2,
        "{}",
        shown(&found)
    );
}

#[test]
fn the_checker_sees_circles_through_every_kind_of_path() {
    // a -> b by a grouped use, b -> c inline, c -> a by super from a child.
    let dir = scratch(
        "circle",
        &[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::{b::thing, config};"),
            ("b.rs", "fn f() { crate::c::sub::g(); }"),
            ("c/mod.rs", "mod sub;"),
            ("c/sub.rs", "use super::super::a; // crate::nothing"),
        ],
    );
    let found = cycle(&graph(&dir)).expect("the circle is found");
    assert_eq!(
        shown(&found),
        "crate::a -> crate::b -> crate::c::sub -> crate::a"
    );
    let all: Vec<Module> = tangled(&graph(&dir)).into_iter().collect();
    assert_eq!(shown(&all), "crate::a -> crate::b -> crate::c::sub");
    // A child named by its bare name, and its parent named back through super.
    let dir = scratch(
        "child",
        &[
            ("lib.rs", "mod w;"),
            ("w/mod.rs", "mod r; fn f() { r::g(); } pub fn h() {}"),
            ("w/r.rs", "pub fn g() { super::h(); }"),
        ],
    );
    assert!(cycle(&graph(&dir)).is_some());
    // A unit test module's paths are its own.
    let dir = scratch(
        "tests",
        &[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::x;"),
            ("b.rs", "pub fn x() {} mod tests { use super::super::a; }"),
        ],
    );
    assert_eq!(cycle(&graph(&dir)), None);
    // Paths in comments and strings are no imports.
    let dir = scratch(
        "quiet",
        &[
            ("lib.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::x; // see crate::b"),
            (
                "b.rs",
                "/// crate::a::y\nconst S: &str = \"crate::a::y\"; const C: char = '\"';",
            ),
        ],
    );
    assert_eq!(cycle(&graph(&dir)), None);
    let _ = fs::remove_dir_all(dir);
}
