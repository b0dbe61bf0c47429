//! The step id rule: 1 to 64 lowercase letters, digits, `-` and `_`; `task` is reserved.

use crate::error::WorkflowError;

/// The longest step id, in characters.
pub const MAX_ID_LEN: usize = 64;

/// Returns whether `c` may appear in a step id (and so in a `$<step>` reference).
pub(crate) fn is_id_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_'
}

/// Checks a step id against the id rule and the reserved name `task`.
pub fn check_step_id(id: &str) -> Result<(), WorkflowError> {
    let problem = if id.is_empty() {
        Some("it is empty")
    } else if id.chars().count() > MAX_ID_LEN {
        Some("it is longer than 64 characters")
    } else if !id.chars().all(is_id_char) {
        Some("it has a character other than a-z, 0-9, `-` and `_`")
    } else {
        None
    };
    match problem {
        Some(problem) => Err(WorkflowError::InvalidId { id: id.to_owned(), problem }),
        None if id == "task" => Err(WorkflowError::ReservedId),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(check_step_id("survey").is_ok());
        assert!(check_step_id("a-b_9").is_ok());
        assert!(check_step_id(&"a".repeat(64)).is_ok());
        assert!(check_step_id(&"a".repeat(65)).is_err());
        assert!(check_step_id("").is_err());
        assert!(check_step_id("Survey").is_err());
        assert!(check_step_id("a b").is_err());
        assert_eq!(check_step_id("task"), Err(WorkflowError::ReservedId));
    }
}
