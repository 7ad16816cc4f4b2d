//! The modules of every crate read bottom-up: within each module folder no two modules import each other, directly
//! or round a longer circle (DEVELOPERS.md, "No import cycles"). Needs no device: it reads the sources.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// One module folder: `prefix` is how its modules are named from anywhere in the crate (`crate::` at the top,
/// `crate::specialise::` inside `spec/`), `sources` each child module's text (a folder module's files together).
struct Folder {
    path: PathBuf,
    prefix: String,
    /// Per child: all its text, the part whose `super::` names this folder (the child's own file), and whether
    /// it has a folder of its own.
    sources: BTreeMap<String, (String, String, bool)>,
    /// Names a child re-exports through the folder (`pub use child::{Name, …}` in lib.rs/mod.rs) → that child.
    reexports: BTreeMap<String, String>,
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out
}

/// A source file's text without its unit tests (`#[cfg(test)] mod tests { … }`, last in the file by convention):
/// what a test module imports is not layering.
fn read(p: &Path) -> String {
    let text =
        std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {}: {e}", p.display()));
    match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => text[..i].to_owned(),
        None => text,
    }
}

fn ident_at(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path component of every item named after `prefix` in `text`: `crate::a::b` and
/// `crate::{a, b::c}` give `a` (and `b`).
fn named_after(text: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find(prefix) {
        let before_ok = i == 0
            || !rest[..i]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':');
        rest = &rest[i + prefix.len()..];
        if !before_ok {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0usize;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphanumeric() || c == '_') => {
                        out.insert(ident_at(&group[j..]).to_owned());
                        item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let id = ident_at(rest);
            if !id.is_empty() {
                out.insert(id.to_owned());
            }
        }
    }
    out
}

fn folder(path: &Path, prefix: String) -> Folder {
    let mut sources = BTreeMap::new();
    let mut reexports = BTreeMap::new();
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    // The folder's own file: `mod.rs`/`lib.rs` inside it, or `name.rs` beside it (`compile_cost.rs` with
    // `compile_cost/tests.rs`).
    let own: Vec<PathBuf> = ["lib.rs", "mod.rs", "main.rs"]
        .iter()
        .map(|f| path.join(f))
        .chain([path.with_extension("rs")])
        .filter(|p| p.is_file())
        .collect();
    for p in &own {
        for line in read(p).lines() {
            let Some(rest) = line.trim().strip_prefix("pub use ") else {
                continue;
            };
            let child = ident_at(rest).to_owned();
            for n in named_after(rest, &format!("{child}::")) {
                reexports.insert(n, child.clone());
            }
        }
    }
    for p in entries {
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            // A folder module; one with a file beside it is that file's module (below).
            if p.join("mod.rs").exists() {
                let text: String = rust_files(&p).iter().map(|f| read(f)).collect();
                sources.insert(name, (text, read(&p.join("mod.rs")), true));
            }
        } else if p.extension().is_some_and(|e| e == "rs") && !own.contains(&p) {
            let own_text = read(&p);
            let mut text = own_text.clone();
            let folder = p.with_extension("");
            if folder.is_dir() {
                text.extend(rust_files(&folder).iter().map(|f| read(f)));
            }
            sources.insert(name, (text, own_text, folder.is_dir()));
        }
    }
    Folder {
        path: path.to_owned(),
        prefix,
        sources,
        reexports,
    }
}

/// Every module folder of the crate at `src`.
fn folders(src: &Path) -> Vec<Folder> {
    let mut out = vec![folder(src, "crate::".to_owned())];
    let mut i = 0;
    while i < out.len() {
        let (path, prefix) = (out[i].path.clone(), out[i].prefix.clone());
        let children: Vec<String> = out[i]
            .sources
            .iter()
            .filter(|(_, (_, _, has_folder))| *has_folder)
            .map(|(n, _)| n.clone())
            .collect();
        for c in children {
            out.push(folder(&path.join(&c), format!("{prefix}{c}::")));
        }
        i += 1;
    }
    out
}

fn edges(f: &Folder) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    for (name, (text, own_text, _)) in &f.sources {
        let mut deps = named_after(text, &f.prefix);
        deps.extend(named_after(own_text, "super::"));
        let deps = deps
            .into_iter()
            .filter_map(|d| {
                if f.sources.contains_key(&d) {
                    Some(d)
                } else {
                    f.reexports.get(&d).cloned()
                }
            })
            .filter(|d| d != name)
            .collect();
        out.insert(name.clone(), deps);
    }
    out
}

/// A circle of imports, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_owned(), 1);
        stack.push(n.to_owned());
        for d in graph.get(n).into_iter().flatten() {
            match state.get(d.as_str()).copied().unwrap_or(0) {
                1 => {
                    let at = stack.iter().position(|s| s == d).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(d.clone());
                    return Some(cycle);
                }
                0 => {
                    if let Some(c) = visit(d, graph, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_owned(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0
            && let Some(c) = visit(n, graph, &mut state, &mut Vec::new())
        {
            return Some(c);
        }
    }
    None
}

fn crate_sources() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut srcs = vec![root.join("src")];
    let mut crates: Vec<_> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    crates.sort();
    srcs.extend(crates);
    srcs
}

#[test]
fn no_module_imports_one_that_imports_it() {
    let mut circles = Vec::new();
    let mut folders_seen = 0;
    for src in crate_sources() {
        for f in folders(&src) {
            folders_seen += 1;
            if let Some(c) = find_cycle(&edges(&f)) {
                circles.push(format!("{}: {}", f.path.display(), c.join(" → ")));
            }
        }
    }
    assert!(
        folders_seen >= 10,
        "only {folders_seen} module folders found"
    );
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_reader_sees_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "mod a;\nmod b;\npub use a::{A, AA};\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "use crate::{b::B, error};\npub struct A;",
    )
    .unwrap();
    std::fs::write(dir.path().join("b.rs"), "use crate::A;\npub struct B;").unwrap();
    let f = folder(dir.path(), "crate::".to_owned());
    let cycle = find_cycle(&edges(&f)).expect("a → b → a is a circle");
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    std::fs::write(dir.path().join("b.rs"), "use crate::error;\npub struct B;").unwrap();
    assert_eq!(
        find_cycle(&edges(&folder(dir.path(), "crate::".to_owned()))),
        None
    );
}
