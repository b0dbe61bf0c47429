//! Bounded input: the reader refuses what is not a regular file, what is too large, invalid
//! UTF-8 and a BOM, each with the file and a position; JSON objects that name a key twice
//! are refused by name and position; freezing many plugin references stays linear enough.

use std::io::Write;
use std::path::Path;

use clio_spec::{AgentDef, AgentDefinitionError, FileKind, InputError, duplicate_json_key};
use proptest::prelude::*;

fn temp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("clio-spec-inputs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

#[test]
fn a_directory_and_devices_are_named_as_such() {
    let dir = std::env::temp_dir();
    let error = clio_spec::read_input(&dir).unwrap_err();
    assert!(matches!(error, InputError::NotAFile { kind: FileKind::Directory, .. }), "{error}");
    assert!(error.to_string().contains("it is a directory"), "{error}");
    if Path::new("/dev/zero").exists() {
        let error = clio_spec::read_input(Path::new("/dev/zero")).unwrap_err();
        assert!(matches!(error, InputError::NotAFile { kind: FileKind::CharDevice, .. }));
        assert!(error.to_string().contains("/dev/zero: it is a character device"), "{error}");
    }
    let error = clio_spec::read_input(Path::new("/no/such/file.json")).unwrap_err();
    assert!(error.is_not_found(), "{error}");
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_without_blocking() {
    let fifo = temp("pipe");
    let _ = std::fs::remove_file(&fifo);
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo on this machine
    }
    // Nobody writes to the FIFO: an open for reading would block for ever.
    let error = clio_spec::read_input(&fifo).unwrap_err();
    assert!(matches!(error, InputError::NotAFile { kind: FileKind::Fifo, .. }), "{error}");
    assert!(error.to_string().contains("named pipe (FIFO)"), "{error}");
    let _ = std::fs::remove_file(&fifo);
}

#[test]
fn a_file_over_the_limit_is_refused_with_its_size() {
    let path = temp("big.json");
    let mut file = std::fs::File::create(&path).unwrap();
    file.write_all(&[b' '; 2048]).unwrap();
    drop(file);
    let error = clio_spec::read_input_within(&path, 1024).unwrap_err();
    assert!(matches!(error, InputError::TooLarge { size: 2048, limit: 1024, .. }), "{error}");
    assert!(clio_spec::read_input_within(&path, 2048).is_ok());
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_bom_and_invalid_utf8_in_a_file_are_placed() {
    let path = temp("bom.toml");
    std::fs::write(&path, b"\xEF\xBB\xBFid = \"a\"\n").unwrap();
    let error = clio_spec::read_input(&path).unwrap_err();
    assert!(error.to_string().contains("bom.toml:1:1: "), "{error}");
    assert!(error.to_string().contains("byte order mark"), "{error}");
    std::fs::write(&path, b"id = \"a\"\nname = \"\xC3(\"\n").unwrap();
    let error = clio_spec::read_input(&path).unwrap_err();
    assert!(
        matches!(error, InputError::InvalidUtf8 { offset: 17, line: 2, column: 9, .. }),
        "{error:?}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn an_agent_in_json_that_names_a_key_twice_is_refused() {
    let text = "{\n  \"id\": \"a\",\n  \"flow\": {\"id\": \"react\", \"options\": {\"x\": 1, \"x\": 2}}\n}";
    let error = AgentDef::from_json(text, "a.json").unwrap_err();
    assert_eq!(
        error.to_string(),
        "a.json:3:47: duplicate key `x`: an object may name each key once"
    );
    let spec = AgentDef::from_toml("id = \"a\"\nplugins = [\"core\"]", "a.toml").unwrap().spec();
    let json = spec.unwrap().to_json().to_string();
    let doubled = json.replacen("{\"id\"", "{\"id\":\"b\",\"id\"", 1);
    let error = clio_spec::AgentSpec::from_json(&doubled).unwrap_err();
    assert!(matches!(error, AgentDefinitionError::Parse { line: 1, column: 11, .. }), "{error}");
}

#[test]
fn toml_refuses_a_key_twice_with_its_position() {
    let error = AgentDef::from_toml("id = \"a\"\nid = \"b\"\n", "a.toml").unwrap_err();
    assert!(error.to_string().starts_with("a.toml:2:1: "), "{error}");
    assert!(error.to_string().contains("duplicate key"), "{error}");
}

/// 20,000 plugin references in one layer and another 20,000 that a derived layer narrows:
/// the old way parsed every reference already placed for each new one (4 * 10^8 parses
/// here, minutes), the map finds each in a step.
#[test]
fn many_plugin_references_freeze_without_quadratic_work() {
    let n = 20_000;
    let mut text = String::from("id = \"big\"\nextends = \"base\"\nplugins = [\"core\"");
    for i in 0..n {
        text.push_str(&format!(", \"p{i}@^1\""));
    }
    text.push_str("]\n[[layer]]\nid = \"base\"\nplugins = [\"core\"");
    for i in 0..n {
        text.push_str(&format!(", \"m/p{i}\""));
    }
    text.push_str("]\n");
    let spec = AgentDef::from_toml(&text, "big.toml").unwrap().spec().unwrap();
    assert_eq!(spec.plugins().len(), n + 1);
    assert_eq!(spec.plugins()[1].reference, "p0@^1");
    assert_eq!(spec.plugins()[1].layer, "big");
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z]{1,3}", "[a-zé\"\\\\\n]{1,4}"]
}

/// A JSON object of `keys` (each with a number), pretty or compact.
fn object(keys: &[String], pretty: bool) -> String {
    let map: Vec<String> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            // Values alternate between numbers and text with quotes and wide characters, so
            // that a position counted in bytes cannot pass for one counted in characters.
            let value = if i % 2 == 0 { i.to_string() } else { format!("\"é\\\"{i}\"") };
            format!("{}: {value}", serde_json::to_string(k).unwrap())
        })
        .collect();
    if pretty {
        format!("{{\n  {}\n}}", map.join(",\n  "))
    } else {
        format!("{{{}}}", map.join(","))
    }
}

proptest! {
    /// An object with distinct keys has no duplicate; repeating any one is found, by
    /// name, at the line and column where the repeat's quote is.
    #[test]
    fn a_repeated_key_is_found_where_it_is(
        keys in prop::collection::hash_set(key(), 1..8),
        pick in any::<prop::sample::Index>(),
        pretty in any::<bool>(),
        nest in any::<bool>(),
    ) {
        let keys: Vec<String> = keys.into_iter().collect();
        let distinct = object(&keys, pretty);
        prop_assert_eq!(duplicate_json_key(&distinct), None);
        prop_assert!(serde_json::from_str::<serde_json::Value>(&distinct).is_ok());
        let repeated = pick.get(&keys).clone();
        let mut with_repeat = keys.clone();
        with_repeat.push(repeated.clone());
        let inner = object(&with_repeat, pretty);
        let text = if nest { format!("[1, {{\"k\": {inner}}}]") } else { inner };
        let dup = duplicate_json_key(&text);
        prop_assert!(dup.is_some(), "{text}");
        let dup = dup.unwrap();
        prop_assert_eq!(&dup.key, &repeated);
        // The reported line and column point at the last occurrence's opening quote.
        let quoted = serde_json::to_string(&repeated).unwrap();
        let at = text.rfind(&quoted).unwrap();
        let before = &text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        prop_assert_eq!((dup.line, dup.column), (line, column), "{}", text);
    }

    /// Any byte string: invalid UTF-8 is reported at the first invalid byte, with the line
    /// and column the valid text before it gives; valid text reads back unchanged.
    #[test]
    fn invalid_utf8_is_reported_at_its_first_byte(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let path = Path::new("x.json");
        match clio_spec::input_text(bytes.clone(), path) {
            Ok(text) => prop_assert_eq!(text.as_bytes(), &bytes[..]),
            Err(InputError::ByteOrderMark { .. }) => prop_assert!(bytes.starts_with(&[0xEF, 0xBB, 0xBF])),
            Err(InputError::InvalidUtf8 { offset, line, column, .. }) => {
                let valid = std::str::from_utf8(&bytes[..offset]);
                prop_assert!(valid.is_ok());
                prop_assert!(std::str::from_utf8(&bytes).is_err());
                let before = valid.unwrap();
                prop_assert_eq!(line, before.matches('\n').count() + 1);
                prop_assert_eq!(column, before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1);
            }
            Err(other) => prop_assert!(false, "{other}"),
        }
    }
}
