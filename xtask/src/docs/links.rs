//! Links: found in Markdown and HTML, and checked, for `cargo xtask docs`.
//!
//! Markdown links are found by a small scanner rather than a Markdown parser: inline links
//! and images (`[text](target)`, `![alt](target)`), with an optional title, and reference
//! definitions (`[name]: target`), outside fenced code blocks and code spans. That is all
//! the repository's pages use; what it does not read (indented code blocks, links split
//! across lines) it does not check either. HTML links are the `href` and `src` attributes
//! of the built site.
//!
//! Only links inside the repository or the site are checked, never the network: a link
//! with a scheme (`https:`, `mailto:`) is external. A broken link is reported with the file
//! it is in (and its line, for Markdown), the link as written and what is wrong with it.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Component, Path, PathBuf};

/// A link found in a Markdown text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MdLink {
    /// The target as written (`cli.md#exit-codes`, `https://…`).
    pub(crate) target: String,
    /// The 1-based line it is on.
    pub(crate) line: usize,
    /// Where the target is in the text, to rewrite it.
    pub(crate) range: Range<usize>,
}

/// Returns the links of Markdown `text`, in order.
pub(crate) fn markdown_links(text: &str) -> Vec<MdLink> {
    let mut links = Vec::new();
    // The fence that opened the code block we are in: its character and length.
    let mut fence: Option<(u8, usize)> = None;
    let mut offset = 0;
    for (index, line) in text.split_inclusive('\n').enumerate() {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        let run = |c: u8| trimmed.bytes().take_while(|b| *b == c).count();
        if let Some((c, n)) = fence {
            if run(c) >= n && trimmed[run(c)..].trim().is_empty() {
                fence = None;
            }
            continue;
        }
        if let Some(c) = [b'`', b'~'].into_iter().find(|c| run(*c) >= 3) {
            fence = Some((c, run(c)));
            continue;
        }
        let indent = line.len() - trimmed.len();
        if let Some(found) = reference_definition(trimmed) {
            let range = start + indent + found.start..start + indent + found.end;
            links.push(MdLink { target: text[range.clone()].to_owned(), line: index + 1, range });
            continue;
        }
        for found in inline_targets(line) {
            let range = start + found.start..start + found.end;
            links.push(MdLink { target: text[range.clone()].to_owned(), line: index + 1, range });
        }
    }
    links
}

/// Returns where the target of a reference definition (`[name]: target`) is in `line`.
fn reference_definition(line: &str) -> Option<Range<usize>> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find("]:")?;
    if close == 0 || rest[..close].contains('[') {
        return None;
    }
    let after = 1 + close + 2;
    let target_start = after + (line[after..].len() - line[after..].trim_start().len());
    let len = line[target_start..].find(char::is_whitespace).unwrap_or(line.len() - target_start);
    (len > 0).then(|| target_start..target_start + len)
}

/// Returns where the targets of inline links (`](target)`) are in `line`, skipping code
/// spans.
fn inline_targets(line: &str) -> Vec<Range<usize>> {
    let bytes = line.as_bytes();
    let mut found = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] == b'`' {
            let n = bytes[at..].iter().take_while(|b| **b == b'`').count();
            let ticks = "`".repeat(n);
            // A code span ends at the next run of exactly as many backticks.
            let mut search = at + n;
            let mut end = None;
            while let Some(i) = line[search..].find(&ticks) {
                let close = search + i;
                let run = bytes[close..].iter().take_while(|b| **b == b'`').count();
                if run == n {
                    end = Some(close + n);
                    break;
                }
                search = close + run;
            }
            at = end.unwrap_or(at + n);
            continue;
        }
        if bytes[at] == b']'
            && bytes.get(at + 1) == Some(&b'(')
            && let Some(range) = inline_target(line, at + 2)
        {
            at = range.end;
            found.push(range);
            continue;
        }
        at += 1;
    }
    found
}

/// Returns where the target of an inline link whose `(` ends just before `start` is.
fn inline_target(line: &str, start: usize) -> Option<Range<usize>> {
    let bytes = line.as_bytes();
    if bytes.get(start) == Some(&b'<') {
        let end = line[start..].find('>')? + start;
        return Some(start + 1..end);
    }
    let mut depth = 0usize;
    for (i, b) in bytes.iter().enumerate().skip(start) {
        match b {
            b'(' => depth += 1,
            b')' if depth == 0 => return (i > start).then_some(start..i),
            b')' => depth -= 1,
            b' ' | b'\t' | b'\n' | b'\r' => return (i > start).then_some(start..i),
            _ => {}
        }
    }
    None
}

/// Returns whether `target` names a scheme (`https:`, `mailto:`): a link out of the
/// repository, not checked.
pub(crate) fn is_external(target: &str) -> bool {
    if target.starts_with("//") {
        return true;
    }
    match target.find(':') {
        Some(colon) => {
            let scheme = &target[..colon];
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

/// Splits `target` into its path and its fragment (without `#`), dropping a query.
pub(crate) fn split_target(target: &str) -> (&str, Option<&str>) {
    let (path, fragment) = match target.split_once('#') {
        Some((path, fragment)) => (path, Some(fragment)),
        None => (target, None),
    };
    (path.split('?').next().unwrap_or(path), fragment)
}

/// Decodes `%XX` escapes in a link's path.
fn percent_decode(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) =
                (bytes.get(i + 1).and_then(|b| hex(*b)), bytes.get(i + 2).and_then(|b| hex(*b)))
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Returns `base` joined with the relative `path`, with `.` and `..` resolved, or `None`
/// when `..` climbs above `base`'s root (a relative path with no parent left).
pub(crate) fn join_normalized(base: &Path, path: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = Vec::new();
    let decoded = percent_decode(path);
    for component in base.components().chain(Path::new(&decoded).components()) {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if !matches!(parts.last(), Some(Component::Normal(_))) {
                    return None;
                }
                parts.pop();
            }
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

/// Returns the id mdBook (and GitHub, for these pages) gives a heading: its text
/// lowercased, whitespace as `-`, and every character but letters, digits, `_` and `-`
/// dropped.
pub(crate) fn heading_id(text: &str) -> String {
    text.chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_ascii_lowercase())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Returns the ids of the headings of Markdown `text` (ATX headings, outside code
/// blocks), a repeated one numbered as mdBook numbers it (`name`, `name-1`, …).
pub(crate) fn markdown_heading_ids(text: &str) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut in_fence = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        let level = trimmed.bytes().take_while(|b| *b == b'#').count();
        if in_fence || level == 0 || level > 6 || !trimmed[level..].starts_with(' ') {
            continue;
        }
        let id = heading_id(&heading_text(trimmed[level..].trim()));
        let count = seen.entry(id.clone()).or_insert(0);
        ids.insert(if *count == 0 { id } else { format!("{id}-{count}") });
        *count += 1;
    }
    ids
}

/// Returns the text a heading shows: links reduced to their text, code and emphasis
/// marks dropped.
fn heading_text(markdown: &str) -> String {
    let mut text = markdown.to_owned();
    for found in inline_targets(markdown).into_iter().rev() {
        // `[label](target)`: drop `](target)` and the opening `[`.
        let open = markdown[..found.start - 2].rfind('[').unwrap_or(0);
        text.replace_range(found.start - 2..found.end + 1, "");
        text.replace_range(open..open + 1, "");
    }
    text.chars().filter(|c| !matches!(c, '`' | '*')).collect()
}

/// One broken link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Broken {
    /// The file the link is in, as shown (relative to the root checked), with `:LINE` for
    /// Markdown.
    pub(crate) place: String,
    /// The link as written.
    pub(crate) link: String,
    /// What is wrong with it.
    pub(crate) why: String,
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: broken link `{}`: {}", self.place, self.link, self.why)
    }
}

/// Checks the links of the Markdown files `files` (paths relative to `root`): each
/// relative link must name a file or folder of the repository (or a page in `generated`,
/// which the guide's build makes next to them), and a fragment must name a heading of the
/// Markdown page it points into.
pub(crate) fn check_markdown(
    root: &Path,
    files: &[PathBuf],
    generated: &BTreeSet<PathBuf>,
) -> Vec<Broken> {
    let mut broken = Vec::new();
    let mut headings: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    let mut ids_of = |file: &Path| -> BTreeSet<String> {
        headings
            .entry(file.to_path_buf())
            .or_insert_with(|| {
                std::fs::read_to_string(root.join(file))
                    .map(|text| markdown_heading_ids(&text))
                    .unwrap_or_default()
            })
            .clone()
    };
    for file in files {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            broken.push(Broken {
                place: file.display().to_string(),
                link: String::new(),
                why: "cannot be read".to_owned(),
            });
            continue;
        };
        for link in markdown_links(&text) {
            if is_external(&link.target) {
                continue;
            }
            let place = format!("{}:{}", file.display(), link.line);
            let report =
                |why: String| Broken { place: place.clone(), link: link.target.clone(), why };
            let (path, fragment) = split_target(&link.target);
            if path.starts_with('/') {
                broken.push(report("an absolute path; links between files are relative".into()));
                continue;
            }
            let target = if path.is_empty() {
                file.clone()
            } else {
                let dir = file.parent().unwrap_or(Path::new(""));
                match join_normalized(dir, path) {
                    Some(target) => target,
                    None => {
                        broken.push(report("it points above the repository".into()));
                        continue;
                    }
                }
            };
            let exists = root.join(&target).exists();
            if !exists && !generated.contains(&target) {
                broken.push(report(format!("{} does not exist", target.display())));
                continue;
            }
            let is_markdown = target.extension().is_some_and(|e| e == "md");
            if let Some(fragment) = fragment.filter(|f| !f.is_empty())
                && exists
                && is_markdown
                && !ids_of(&target).contains(fragment)
            {
                broken.push(report(format!("{} has no heading `#{fragment}`", target.display())));
            }
        }
    }
    broken
}

/// Returns the `href` and `src` attribute values of `html`, `&amp;` decoded.
pub(crate) fn html_links(html: &str) -> Vec<String> {
    attribute_values(html, &["href", "src"])
}

/// Returns the `id` (and `name`) attribute values of `html`: what a fragment can name.
pub(crate) fn html_ids(html: &str) -> BTreeSet<String> {
    attribute_values(html, &["id", "name"]).into_iter().collect()
}

/// Returns the values of the attributes named `names` in the tags of `html` (not in its
/// text, comments, scripts or styles), `&amp;` decoded.
fn attribute_values(html: &str, names: &[&str]) -> Vec<String> {
    let bytes = html.as_bytes();
    let mut values = Vec::new();
    let mut at = 0;
    while let Some(found) = html[at..].find('<') {
        let open = at + found;
        if html[open..].starts_with("<!--") {
            at = html[open..].find("-->").map_or(html.len(), |end| open + end + 3);
            continue;
        }
        at = open + 1;
        if !bytes.get(open + 1).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let name_end = html[open + 1..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(html.len(), |n| open + 1 + n);
        let tag = html[open + 1..name_end].to_ascii_lowercase();
        let mut i = name_end;
        loop {
            while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            match bytes.get(i) {
                None => break,
                Some(b'>') => {
                    i += 1;
                    break;
                }
                Some(b'/') => {
                    i += 1;
                    continue;
                }
                Some(_) => {}
            }
            let attr_start = i;
            while bytes.get(i).is_some_and(|b| !b.is_ascii_whitespace() && !b"=>/".contains(b)) {
                i += 1;
            }
            let attr = &html[attr_start..i];
            if i == attr_start {
                i += 1;
                continue;
            }
            while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            if bytes.get(i) != Some(&b'=') {
                continue;
            }
            i += 1;
            while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
                i += 1;
            }
            let value = match bytes.get(i) {
                Some(quote @ (b'"' | b'\'')) => {
                    let end = html[i + 1..].find(*quote as char).map_or(html.len(), |n| i + 1 + n);
                    let value = &html[i + 1..end];
                    i = (end + 1).min(html.len());
                    value
                }
                _ => {
                    let start = i;
                    while bytes.get(i).is_some_and(|b| !b.is_ascii_whitespace() && *b != b'>') {
                        i += 1;
                    }
                    &html[start..i]
                }
            };
            if names.iter().any(|n| n.eq_ignore_ascii_case(attr)) {
                values.push(value.replace("&amp;", "&"));
            }
        }
        at = i.max(open + 1);
        if tag == "script" || tag == "style" {
            let close = format!("</{tag}");
            at = find_ignore_case(&html[at..], &close).map_or(html.len(), |n| at + n);
        }
    }
    values
}

/// Returns where `needle` (ASCII) first is in `haystack`, ignoring ASCII case.
fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    let needle = needle.as_bytes();
    haystack.as_bytes().windows(needle.len()).position(|w| w.eq_ignore_ascii_case(needle))
}

/// What checking a site found.
#[derive(Debug, Default)]
pub(crate) struct SiteReport {
    /// The broken links.
    pub(crate) broken: Vec<Broken>,
    /// How many links were checked.
    pub(crate) checked: usize,
    /// How many links of rustdoc's pages were left as another crate's docs wrote them.
    pub(crate) unresolved: usize,
}

/// Checks the links of every HTML file under `site`: each relative `href` and `src` must
/// name a file inside `site` (a folder stands for its `index.html`), and a fragment must
/// name an `id` of the page it points to. Source-line fragments of rustdoc's source pages
/// (`#12`, `#12-20`) are set by its script, not by ids, and are not checked. A page that
/// sets `<base href="/…">` (mdBook's 404 page, for a web server) is skipped: its links
/// resolve against a server's root, not against the folder.
///
/// In rustdoc's pages (those under `rustdoc`), a relative link to a path with no extension
/// is not checked but counted as unresolved: rustdoc's own links name files (`.html`,
/// `.js`) or folders (`../`), and the rest is the doc text of another crate, shown where
/// its blanket impls apply to ours, with links rustdoc could not resolve without that
/// crate's docs (tracing's `WithSubscriber` docs link `dispatcher#…`). The docs of this
/// workspace's crates are held to their links by rustdoc itself (`-D warnings` denies
/// broken intra-doc links). The lists of implementors rustdoc loads from `trait.impl/` and
/// `type.impl/` are not checked either: rustdoc writes each only when there is one.
pub(crate) fn check_site(site: &Path, rustdoc: &Path) -> Result<SiteReport, String> {
    let mut pages = Vec::new();
    let mut dirs = vec![site.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "html") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    // Each page read once: where a redirect page sends its reader (itself for any other).
    let mut redirects: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    let mut report = SiteReport::default();
    for page in &pages {
        let html = std::fs::read_to_string(page)
            .map_err(|e| format!("cannot read {}: {e}", page.display()))?;
        if html.contains("<base href=\"/") {
            continue;
        }
        let shown = page.strip_prefix(site).unwrap_or(page).display().to_string();
        let dir = page.parent().unwrap_or(site);
        let in_rustdoc = page.starts_with(rustdoc);
        for link in html_links(&html) {
            if link.is_empty() || is_external(&link) {
                continue;
            }
            let (path, fragment) = split_target(&link);
            if in_rustdoc
                && !path.is_empty()
                && !path.ends_with('/')
                && Path::new(path).extension().is_none()
            {
                report.unresolved += 1;
                continue;
            }
            // A trait's page loads the list of its implementors in other crates from
            // `trait.impl/…js` (a type's, `type.impl/…js`), which rustdoc writes only when
            // there are some: a public trait whose only implementors are private has none.
            let implementors = path.contains("trait.impl/") || path.contains("type.impl/");
            if in_rustdoc && implementors && path.ends_with(".js") {
                report.unresolved += 1;
                continue;
            }
            report.checked += 1;
            let broken = &mut report.broken;
            let report = |why: String| Broken { place: shown.clone(), link: link.clone(), why };
            let target = if path.is_empty() {
                page.clone()
            } else if path.starts_with('/') {
                broken
                    .push(report("an absolute path, which a folder opened as files lacks".into()));
                continue;
            } else {
                match join_normalized(dir, path) {
                    Some(target) if target.starts_with(site) => target,
                    _ => {
                        broken.push(report("it points out of the site".into()));
                        continue;
                    }
                }
            };
            let target = if target.is_dir() { target.join("index.html") } else { target };
            if !target.is_file() {
                let missing = target.strip_prefix(site).unwrap_or(&target).display().to_string();
                broken.push(report(format!("{missing} does not exist")));
                continue;
            }
            let Some(fragment) = fragment.filter(|f| !f.is_empty()) else { continue };
            let is_line =
                fragment.split('-').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            if is_line || target.extension().is_none_or(|e| e != "html") {
                continue;
            }
            // rustdoc writes a redirect page at an item's private-module path (a link from
            // another crate's re-export points there); its ids are the page it names.
            let target = redirects
                .entry(target.clone())
                .or_insert_with(|| {
                    std::fs::read_to_string(&target)
                        .ok()
                        .and_then(|html| redirect_target(&html))
                        .and_then(|to| join_normalized(target.parent().unwrap_or(site), &to))
                        .filter(|to| to.starts_with(site) && to.is_file())
                        .unwrap_or_else(|| target.clone())
                })
                .clone();
            let known = ids.entry(target.clone()).or_insert_with(|| {
                std::fs::read_to_string(&target).map(|html| html_ids(&html)).unwrap_or_default()
            });
            // rustdoc writes its ids escaped (`impl-From%3CT%3E-for-T`), mdBook plain.
            let decoded = percent_decode(fragment);
            if !known.contains(fragment) && !known.contains(&decoded) {
                let fragment = decoded;
                let name = target.strip_prefix(site).unwrap_or(&target).display().to_string();
                broken.push(report(format!("{name} has no id `{fragment}`")));
            }
        }
    }
    Ok(report)
}

/// Returns where a redirect page (`<meta http-equiv="refresh" content="0;URL=…">`, as
/// rustdoc writes them) sends its reader, or `None` for any other page.
pub(crate) fn redirect_target(html: &str) -> Option<String> {
    let at = find_ignore_case(html, "http-equiv=\"refresh\"")?;
    let rest = &html[at..];
    let url = find_ignore_case(rest, "URL=")? + 4;
    let end = rest[url..].find('"')?;
    let target = rest[url..url + end].trim();
    (!target.is_empty() && !is_external(target)).then(|| target.to_owned())
}
