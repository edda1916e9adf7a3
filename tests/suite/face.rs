//! The crate's public face, read from its source: every item a user can name (the root's and
//! the public modules' items, and what they re-export), compared with the committed list in
//! `tests/suite/face.txt`. A change to the face is a decision, made by editing that list in the
//! same commit, never by accident.
//!
//! Items marked `#[doc(hidden)]` (they exist for the crate's own tests, benchmarks and
//! examples, with no stability promise) and `#[cfg(test)]` items are not the face. The same
//! reading checks that each type has one name and one path, and that no public function
//! returns `Result<_, String>`: an error a caller can act on is a type.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use syn::{Attribute, Item, UseTree, Visibility};

/// One nameable item: its path from the crate root and its kind.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Named {
    path: String,
    kind: &'static str,
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

/// Whether the attributes hide the item from the face: `#[doc(hidden)]` or `#[cfg(test)]`.
fn hidden(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        let mut found = false;
        if a.path().is_ident("doc") || a.path().is_ident("cfg") {
            let _ = a.parse_nested_meta(|meta| {
                if meta.path.is_ident("hidden") || meta.path.is_ident("test") {
                    found = true;
                }
                Ok(())
            });
        }
        found
    })
}

fn parse(file: &Path) -> syn::File {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The file of module `name` declared in `parent` (a `src/x.rs` beside `src/x/`).
fn module_file(parent: &Path, name: &str) -> PathBuf {
    let dir = match parent.file_stem().and_then(|s| s.to_str()) {
        Some("lib") => parent.parent().unwrap().to_path_buf(),
        Some(stem) => parent.parent().unwrap().join(stem),
        None => unreachable!(),
    };
    dir.join(format!("{name}.rs"))
}

/// A type's name is CamelCase; a function's snake_case; a constant's UPPER_CASE.
fn kind_of_name(name: &str) -> &'static str {
    let first = name.chars().next().unwrap_or('_');
    if name.chars().all(|c| c.is_uppercase() || c == '_' || c.is_ascii_digit()) {
        "const"
    } else if first.is_uppercase() {
        "type"
    } else {
        "item"
    }
}

fn uses(tree: &UseTree, at: &str, out: &mut Vec<Named>) {
    match tree {
        UseTree::Path(p) => uses(&p.tree, at, out),
        UseTree::Name(n) if n.ident != "self" => {
            let name = n.ident.to_string();
            out.push(Named { path: format!("{at}::{name}"), kind: kind_of_name(&name) });
        }
        UseTree::Name(_) => {}
        UseTree::Rename(r) => {
            let name = r.rename.to_string();
            out.push(Named { path: format!("{at}::{name}"), kind: kind_of_name(&name) });
        }
        UseTree::Glob(_) => out.push(Named { path: format!("{at}::*"), kind: "glob" }),
        UseTree::Group(g) => g.items.iter().for_each(|t| uses(t, at, out)),
    }
}

/// The public items of `items` (in `file`, at path `at`), public modules followed.
fn walk(items: &[Item], file: &Path, at: &str, out: &mut Vec<Named>) {
    for item in items {
        let mut add = |vis: &Visibility, attrs: &[Attribute], name: String, kind: &'static str| {
            if is_pub(vis) && !hidden(attrs) {
                out.push(Named { path: format!("{at}::{name}"), kind });
            }
        };
        match item {
            Item::Struct(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "type"),
            Item::Enum(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "type"),
            Item::Trait(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "type"),
            Item::Type(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "type"),
            Item::Union(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "type"),
            Item::Fn(i) => add(&i.vis, &i.attrs, i.sig.ident.to_string(), "fn"),
            Item::Const(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "const"),
            Item::Static(i) => add(&i.vis, &i.attrs, i.ident.to_string(), "const"),
            Item::Use(i) if is_pub(&i.vis) && !hidden(&i.attrs) => uses(&i.tree, at, out),
            Item::Mod(m) if is_pub(&m.vis) && !hidden(&m.attrs) => {
                let name = m.ident.to_string();
                let path = format!("{at}::{name}");
                out.push(Named { path: path.clone(), kind: "module" });
                match &m.content {
                    Some((_, inline)) => walk(inline, file, &path, out),
                    None => {
                        let child = module_file(file, &name);
                        walk(&parse(&child).items, &child, &path, out);
                    }
                }
            }
            _ => {}
        }
    }
}

fn the_face() -> Vec<Named> {
    let lib = crate::support::manifest_path("src/lib.rs");
    let mut out = Vec::new();
    walk(&parse(&lib).items, &lib, "rehearsal", &mut out);
    out.sort();
    out.dedup();
    out
}

fn listed(face: &[Named]) -> String {
    face.iter().map(|n| format!("{} {}\n", n.kind, n.path)).collect()
}

#[test]
fn the_public_face_is_the_committed_list() {
    let face = the_face();
    let now = listed(&face);
    let list = crate::support::manifest_path("tests/suite/face.txt");
    let committed = std::fs::read_to_string(&list).unwrap_or_default();
    if now != committed {
        let path = std::env::temp_dir().join("rehearsal-face.txt");
        std::fs::write(&path, &now).unwrap();
        panic!(
            "the public face changed; if that is meant, copy {} over {} (diff them to see what changed)",
            path.display(),
            list.display()
        );
    }
}

#[test]
fn the_face_holds_about_a_hundred_types_each_with_one_name_and_no_glob() {
    let face = the_face();
    let types: Vec<&Named> = face.iter().filter(|n| n.kind == "type").collect();
    // 120 today: 38 of them are the boundary a core implements (`sut`), 17 the dialect's data
    // (a re-rendered history, a wrap's suffix, Claude Code's tagged notifications and hand-back
    // frame among them), 40 the wire's (a runtime description's dialect reference, request
    // limits and side requests among them);
    // the rest is the runner, the verdict and the scenario's builder.
    assert!(types.len() <= 120, "{} public types: the face is meant to be read in one sitting", types.len());
    let globs: Vec<&Named> = face.iter().filter(|n| n.kind == "glob").collect();
    assert!(globs.is_empty(), "a glob re-export hides what the face holds: {globs:?}");
    let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in &types {
        let name = t.path.rsplit("::").next().unwrap();
        names.entry(name).or_default().push(&t.path);
    }
    let twice: Vec<_> = names.iter().filter(|(_, paths)| paths.len() > 1).collect();
    assert!(twice.is_empty(), "types named or reachable twice: {twice:?}");
}

/// Every `pub fn` (free or a method) of `items` whose return type is `Result<_, String>`.
fn string_errors(items: &[Item], file: &Path, out: &mut Vec<String>) {
    let returns_string_error = |sig: &syn::Signature| {
        let syn::ReturnType::Type(_, ty) = &sig.output else { return false };
        let syn::Type::Path(p) = &**ty else { return false };
        let Some(last) = p.path.segments.last() else { return false };
        let syn::PathArguments::AngleBracketed(args) = &last.arguments else { return false };
        last.ident == "Result"
            && matches!(args.args.iter().nth(1), Some(syn::GenericArgument::Type(syn::Type::Path(e)))
                if e.path.is_ident("String"))
    };
    for item in items {
        match item {
            Item::Fn(f) if is_pub(&f.vis) && returns_string_error(&f.sig) => {
                out.push(format!("{}: fn {}", file.display(), f.sig.ident));
            }
            Item::Impl(i) if i.trait_.is_none() => {
                for inner in &i.items {
                    if let syn::ImplItem::Fn(f) = inner
                        && is_pub(&f.vis)
                        && returns_string_error(&f.sig)
                    {
                        out.push(format!("{}: fn {}", file.display(), f.sig.ident));
                    }
                }
            }
            Item::Mod(m) if !hidden(&m.attrs) => {
                if let Some((_, inline)) = &m.content {
                    string_errors(inline, file, out);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn no_public_function_returns_a_string_as_its_error() {
    let src = crate::support::manifest_path("src");
    let mut found = Vec::new();
    for path in crate::support::rust_files(&src) {
        string_errors(&parse(&path).items, path.strip_prefix(&src).unwrap(), &mut found);
    }
    found.sort();
    assert!(found.is_empty(), "public functions returning Result<_, String>:\n{}", found.join("\n"));
}
