//! Errors of the `ovs-ofctl` syntax parser: each names the offending token, says what was wrong
//! and what is accepted. Owns no parsing; never formats a rule.

/// Why a flow, action list, filter or group text was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OfctlError {
    /// A match field or rule keyword that is not known.
    #[error("unknown field `{token}`; accepted: {accepted}")]
    UnknownField {
        /// The keyword as written.
        token: String,
        /// What would be accepted.
        accepted: &'static str,
    },
    /// An action that is not known.
    #[error("unknown action `{token}`; accepted: {accepted}")]
    UnknownAction {
        /// The action as written.
        token: String,
        /// What would be accepted.
        accepted: &'static str,
    },
    /// A value that does not parse or does not fit.
    #[error("bad value `{token}` for {field}: {reason}")]
    BadValue {
        /// The field or keyword.
        field: String,
        /// The value as written.
        token: String,
        /// What was wrong and what is accepted.
        reason: String,
    },
    /// A mask that is impossible for the field.
    #[error("bad mask in `{token}` for {field}: {reason}")]
    BadMask {
        /// The field.
        field: String,
        /// The value/mask as written.
        token: String,
        /// What was wrong and what is accepted.
        reason: String,
    },
    /// A field (or action) whose prerequisite is not in the match.
    #[error("`{token}` needs {needs} in the match (e.g. `{example}`)")]
    MissingPrerequisite {
        /// The field or action as written.
        token: String,
        /// What the match must say.
        needs: &'static str,
        /// A match that would satisfy it.
        example: &'static str,
    },
    /// A field given twice, or two shorthands that contradict each other.
    #[error("`{token}` conflicts with an earlier `{earlier}`: give each field once")]
    Duplicate {
        /// The later token.
        token: String,
        /// The earlier one.
        earlier: String,
    },
    /// A `goto_table` that does not go to a later table.
    #[error(
        "`{token}` in table {table}: goto_table must go to a later table ({table} < N <= 254)"
    )]
    BadGoto {
        /// The action as written.
        token: String,
        /// The rule's table.
        table: u8,
    },
    /// Anything else that is malformed.
    #[error("`{token}`: {reason}")]
    Syntax {
        /// The offending text.
        token: String,
        /// What was wrong and what is accepted.
        reason: String,
    },
}

impl OfctlError {
    /// The offending token as written.
    pub fn token(&self) -> &str {
        match self {
            OfctlError::UnknownField { token, .. }
            | OfctlError::UnknownAction { token, .. }
            | OfctlError::BadValue { token, .. }
            | OfctlError::BadMask { token, .. }
            | OfctlError::MissingPrerequisite { token, .. }
            | OfctlError::Duplicate { token, .. }
            | OfctlError::BadGoto { token, .. }
            | OfctlError::Syntax { token, .. } => token,
        }
    }

    pub(crate) fn syntax(token: &str, reason: impl Into<String>) -> OfctlError {
        OfctlError::Syntax {
            token: token.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn value(field: &str, token: &str, reason: impl Into<String>) -> OfctlError {
        OfctlError::BadValue {
            field: field.to_string(),
            token: token.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn mask(field: &str, token: &str, reason: impl Into<String>) -> OfctlError {
        OfctlError::BadMask {
            field: field.to_string(),
            token: token.to_string(),
            reason: reason.into(),
        }
    }
}

/// A flows file that was refused: which line, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {source}")]
pub struct OfctlFileError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong on it.
    pub source: OfctlError,
}
