//! docs/design.md's Files map names every file of `src/` and no other, so
//! that the map a newcomer reads first is the tree they will find. The map
//! is the first fenced block after the "## Files" heading: a line starting
//! with `src/` names a file (or, ending in `/`, the folder the indented
//! lines below it are in); an indented line names one or more files of
//! that folder, separated by commas.

use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn mapped(design: &str) -> BTreeSet<String> {
    let section = design
        .split("\n## Files\n")
        .nth(1)
        .expect("docs/design.md has a \"## Files\" section");
    let block = section
        .split("```")
        .nth(1)
        .expect("the Files section has a fenced block");
    let mut names = BTreeSet::new();
    let mut folder = String::new();
    for line in block.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if line.starts_with("src/") {
            if first.ends_with('/') {
                folder = first.to_string();
            } else {
                folder.clear();
                names.insert(first.to_string());
            }
        } else if line.starts_with("  ") && !folder.is_empty() {
            // "a.rs, b.rs   what they are": the names run until a word
            // that is not a file name.
            for word in line.split_whitespace() {
                let name = word.trim_end_matches(',');
                if !name.ends_with(".rs") {
                    break;
                }
                names.insert(format!("{folder}{name}"));
            }
        }
    }
    names
}

fn files(dir: &Path, root: &Path, out: &mut BTreeSet<String>) {
    for entry in fs::read_dir(dir).expect("src/ is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            files(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).expect("under the root");
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_files_map_names_every_file_of_src_and_no_other() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let design = fs::read_to_string(root.join("docs/design.md")).expect("docs/design.md");
    let map = mapped(&design);
    let mut tree = BTreeSet::new();
    files(&root.join("src"), root, &mut tree);
    assert!(tree.len() > 40, "read only {} files of src/", tree.len());
    let unmapped: Vec<&String> = tree.difference(&map).collect();
    let stale: Vec<&String> = map.difference(&tree).collect();
    assert!(
        unmapped.is_empty() && stale.is_empty(),
        "docs/design.md's Files map and src/ disagree: in src/ but not in the map: {unmapped:?}; \
         in the map but not in src/: {stale:?}"
    );
}

#[test]
fn the_map_reader_sees_folders_lists_and_top_files() {
    let doc = "x\n## Files\n\n```\nsrc/lib.rs   load\nsrc/e/      pure\n  a.rs, b.rs   two\n  c.rs         one, d.rs not\nsrc/f.rs     after\n```\n";
    let want: BTreeSet<String> = [
        "src/lib.rs",
        "src/e/a.rs",
        "src/e/b.rs",
        "src/e/c.rs",
        "src/f.rs",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(mapped(doc), want);
}
