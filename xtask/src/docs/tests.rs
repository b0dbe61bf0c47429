//! Tests of the docs build's pure parts: finding links in Markdown and HTML, checking
//! them, and staging the guide's pages with their links rewritten.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::links::{
    check_markdown, check_site, heading_id, html_ids, html_links, is_external,
    markdown_heading_ids, markdown_links,
};
use super::{Generated, Page, guide_pages, relative, rewrite_links, stage_guide};

/// A temporary folder removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("clio-xtask-docs-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn targets(text: &str) -> Vec<String> {
    markdown_links(text).into_iter().map(|l| l.target).collect()
}

#[test]
fn markdown_links_are_found_outside_code() {
    let text = "\
See [the CLI](cli.md#exit-codes) and ![a picture](img/a.png \"title\").
A link in code is none: `[x](not-a-link.md)`, ``[y](nor.md)``.
[Angle](<with space.md>) and [nested](a_(b).md).

```sh
[z](in-a-fence.md)
```
[Unreleased]: https://example.org/compare/v0.1.0...HEAD
[local]: docs/local.md
";
    assert_eq!(
        targets(text),
        [
            "cli.md#exit-codes",
            "img/a.png",
            "with space.md",
            "a_(b).md",
            "https://example.org/compare/v0.1.0...HEAD",
            "docs/local.md"
        ]
    );
    let lines: Vec<usize> = markdown_links(text).iter().map(|l| l.line).collect();
    assert_eq!(lines, [1, 1, 3, 3, 8, 9]);
    for link in markdown_links(text) {
        assert_eq!(&text[link.range.clone()], link.target, "the range is the target's");
    }
}

#[test]
fn schemes_are_external_and_paths_are_not() {
    for external in ["https://x.org", "mailto:a@b.c", "//cdn.example/x.js", "javascript:void(0)"] {
        assert!(is_external(external), "{external}");
    }
    for internal in ["cli.md", "../README.md", "#frag", "a/b.html?x=1:2", "api/index.html"] {
        assert!(!is_external(internal), "{internal}");
    }
}

#[test]
fn heading_ids_follow_mdbook() {
    assert_eq!(heading_id("The `clio` command"), "the-clio-command");
    assert_eq!(heading_id("run_code and script bindings"), "run_code-and-script-bindings");
    assert_eq!(heading_id("Exit codes (1, 2, 255)"), "exit-codes-1-2-255");
    let ids = markdown_heading_ids(
        "# Title\n## Notes\n```\n# not a heading\n```\n## Notes\n### [Linked](x.md) *here*\n",
    );
    let expected: BTreeSet<String> =
        ["title", "notes", "notes-1", "linked-here"].iter().map(|s| s.to_string()).collect();
    assert_eq!(ids, expected);
}

#[test]
fn markdown_links_are_checked_against_the_repository() {
    let repo = TempDir::new("md");
    repo.write("README.md", "[guide](docs/a.md#second) [gone](docs/gone.md) [ok](docs/)\n");
    repo.write(
        "docs/a.md",
        "# A\n## Second\n[top](#a) [bad](#third) [b](b.md#nope) [ref](cli-reference.md)\n\
         [up](../../outside.md) [web](https://example.org/#anything)\n",
    );
    repo.write("docs/b.md", "# B\n");
    let files = vec![PathBuf::from("README.md"), PathBuf::from("docs/a.md")];
    let generated: BTreeSet<PathBuf> = [PathBuf::from("docs/cli-reference.md")].into();
    let broken: Vec<String> =
        check_markdown(&repo.0, &files, &generated).iter().map(ToString::to_string).collect();
    assert_eq!(
        broken,
        [
            "README.md:1: broken link `docs/gone.md`: docs/gone.md does not exist",
            "docs/a.md:3: broken link `#third`: docs/a.md has no heading `#third`",
            "docs/a.md:3: broken link `b.md#nope`: docs/b.md has no heading `#nope`",
            "docs/a.md:4: broken link `../../outside.md`: it points above the repository",
        ]
    );
}

fn page(source: &str, staged: &str) -> Page {
    Page { source: source.into(), staged: staged.into() }
}

#[test]
fn the_summary_stages_pages_from_inside_and_outside_docs() {
    let pages =
        guide_pages("# Summary\n[Intro](../README.md)\n- [CLI](cli.md)\n- [Deep](design/x.md)\n")
            .unwrap();
    assert_eq!(
        pages,
        [
            page("docs/SUMMARY.md", "SUMMARY.md"),
            page("README.md", "README.md"),
            page("docs/cli.md", "cli.md"),
            page("docs/design/x.md", "design/x.md"),
        ]
    );
    let clash = guide_pages("[a](../README.md)\n[b](README.md)\n").unwrap_err();
    assert!(clash.contains("would both be the guide's README.md"), "{clash}");
}

#[test]
fn links_are_rewritten_for_the_staged_guide() {
    let pages = [
        page("docs/SUMMARY.md", "SUMMARY.md"),
        page("README.md", "README.md"),
        page("docs/cli.md", "cli.md"),
        page("docs/design/x.md", "design/x.md"),
    ];
    let repo = "https://git.example/clio";
    let readme = "[CLI](docs/cli.md#json) [spec](crates/clio-spec/README.md) [top](#quick-start) \
                  `[code](docs/cli.md)` [web](https://x.org) [contents](docs/SUMMARY.md)";
    assert_eq!(
        rewrite_links(readme, &pages[1], &pages, repo),
        "[CLI](cli.md#json) [spec](https://git.example/clio/blob/HEAD/crates/clio-spec/README.md) \
         [top](#quick-start) `[code](docs/cli.md)` [web](https://x.org) \
         [contents](https://git.example/clio/blob/HEAD/docs/SUMMARY.md)"
    );
    let deep = "[back](../cli.md) [home](../../README.md) [src](../../crates/a/src/lib.rs#L3)";
    assert_eq!(
        rewrite_links(deep, &pages[3], &pages, repo),
        "[back](../cli.md) [home](../README.md) \
         [src](https://git.example/clio/blob/HEAD/crates/a/src/lib.rs#L3)"
    );
    assert_eq!(relative(Path::new(""), Path::new("design/x.md")), Path::new("design/x.md"));
}

#[test]
fn html_links_and_ids_are_attributes() {
    let html = r#"<a href="a.html#x">a</a> <img src='i.png'> <p id="top" class="c">
        <a name="old"></a> <script>el.href="not-this.html"</script> <a href="q?a=1&amp;b=2">"#;
    assert_eq!(html_links(html), ["a.html#x", "i.png", "q?a=1&b=2"]);
    let ids = html_ids(html);
    assert!(ids.contains("top") && ids.contains("old"), "{ids:?}");
}

#[test]
fn the_site_links_are_checked() {
    let site = TempDir::new("site");
    site.write("index.html", r#"<a href="guide/">g</a> <a href="api/x/index.html#fn.f">f</a>"#);
    site.write(
        "guide/index.html",
        r##"<h2 id="intro">I</h2> <a href="#intro">ok</a> <a href="#outro">no</a>
        <a href="page.html">missing</a> <a href="../../up.html">out</a>
        <a href="https://example.org/">web</a> <link href="../api/x/style.css">"##,
    );
    site.write("guide/404.html", r#"<base href="/"> <a href="gone.html">skipped</a>"#);
    site.write(
        "api/x/index.html",
        r#"<h3 id="fn.f">f</h3> <a href="../src/x/lib.rs.html#3-9">s</a> <a href="dispatcher#x">d</a>
        <code>&lt;a href="not-a-tag.html"&gt;</code> <!-- <a href="commented.html"> -->"#,
    );
    site.write("api/x/style.css", "");
    site.write("api/src/x/lib.rs.html", "<pre>…</pre>");
    let report = check_site(&site.0, &site.0.join("api")).unwrap();
    let broken: Vec<String> = report.broken.iter().map(ToString::to_string).collect();
    assert_eq!(
        broken,
        [
            "guide/index.html: broken link `#outro`: guide/index.html has no id `outro`",
            "guide/index.html: broken link `page.html`: guide/page.html does not exist",
            "guide/index.html: broken link `../../up.html`: it points out of the site",
        ]
    );
    assert_eq!((report.checked, report.unresolved), (8, 1));
}

#[test]
fn the_stage_holds_every_page_and_refuses_a_left_out_one() {
    let repo = TempDir::new("stage");
    repo.write(
        "README.md",
        "# Intro\nSee [the CLI](docs/cli.md) and [the code](crates/x/src/lib.rs).\n",
    );
    repo.write("crates/x/src/lib.rs", "");
    repo.write("docs/book.toml", "[book]\nsrc = \".\"\n");
    repo.write(
        "docs/SUMMARY.md",
        "[Intro](../README.md)\n- [CLI](cli.md)\n- [Ref](cli-reference.md)\n",
    );
    repo.write("docs/cli.md", "# CLI\nBack to [the intro](../README.md#intro).\n");
    let stage = repo.0.join("stage");
    let generated = Generated { reference: "# Reference\n", api: "# API\n", python: "# Python\n" };
    stage_guide(&repo.0, &stage, "https://git.example/c", &generated).unwrap();
    let read = |name: &str| std::fs::read_to_string(stage.join(name)).unwrap();
    assert_eq!(
        read("README.md"),
        "# Intro\nSee [the CLI](cli.md) and [the code](https://git.example/c/blob/HEAD/crates/x/src/lib.rs).\n"
    );
    assert_eq!(read("cli.md"), "# CLI\nBack to [the intro](README.md#intro).\n");
    assert_eq!(read("cli-reference.md"), "# Reference\n");
    assert!(stage.join("book.toml").is_file());

    repo.write("docs/forgotten.md", "# Forgotten\n");
    let none = Generated { reference: "", api: "", python: "" };
    let error = stage_guide(&repo.0, &stage, "u", &none).unwrap_err();
    assert!(error.contains("does not list docs/forgotten.md"), "{error}");
    std::fs::remove_file(repo.0.join("docs/forgotten.md")).unwrap();
    repo.write("docs/api.md", "# Mine\n");
    let error = stage_guide(&repo.0, &stage, "u", &none).unwrap_err();
    assert!(error.contains("docs/api.md is a page `cargo xtask docs` writes"), "{error}");
}

#[test]
fn a_rustdoc_redirect_page_names_where_it_sends() {
    let html = r#"<!DOCTYPE html><html><head>
    <meta http-equiv="refresh" content="0;URL=../../clio_journal/struct.Changes.html">
    <title>Redirection</title></head></html>"#;
    assert_eq!(
        super::links::redirect_target(html).as_deref(),
        Some("../../clio_journal/struct.Changes.html")
    );
    assert_eq!(super::links::redirect_target("<html><body id=\"x\"></body></html>"), None);
}
