//! Issue 41's bounds on `plugin check`: a manifest of 10,000 tools checks in one pass
//! (finding each node's line counted the newlines from the start of the file for every
//! node, quadratic in tools: 4,000 tools took 4.9 s, 10,000 more than two minutes), and
//! the lines it reports are still exact at that size.

use clio_plugins::{ProblemCode, check};

#[test]
fn ten_thousand_tools_check_with_exact_lines() {
    const TOOLS: usize = 10_000;
    let dir = tempfile::tempdir().unwrap();
    let clio = dir.path().join("ai.iowarp.clio");
    std::fs::create_dir_all(clio.join("bin")).unwrap();
    std::fs::write(clio.join("bin/tool"), "#!/bin/sh\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(clio.join("bin/tool"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }
    let mut manifest = String::from("id = \"many\"\nversion = \"1.0.0\"\n");
    for i in 0..TOOLS {
        // Five lines per tool; the last tool's permission is not an allowed value.
        let permission = if i + 1 == TOOLS { "maybe" } else { "allow" };
        manifest.push_str(&format!(
            "\n[[tools]]\nname = \"tool_{i}\"\ncommand = \"bin/tool\"\npermission = \"{permission}\"\n"
        ));
    }
    std::fs::write(clio.join("plugin.toml"), &manifest).unwrap();
    let report = check(dir.path());
    assert_eq!(report.problems.len(), 1, "{}", report.render());
    let problem = &report.problems[0];
    assert_eq!(problem.code, ProblemCode::InvalidOption);
    assert_eq!(problem.field, format!("tools[{}].permission", TOOLS - 1));
    // Lines 1-2 are id and version; tool i starts at line 4 + 5i, its permission 3 later.
    let expected = u32::try_from(4 + 5 * (TOOLS - 1) + 3).unwrap();
    assert_eq!(problem.line, Some(expected), "{}", report.render());
}
