//! Errors of the `lb` CLI parser: each names the offending token, says what was wrong and what
//! is accepted. Owns no parsing and no state.

/// Why an `lb` line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// A word that is not a keyword here.
    #[error("unknown `{token}` in `{command}`; accepted: {accepted}")]
    Unknown {
        /// The word as written.
        token: String,
        /// The command it was in (`lb vip`, ...).
        command: &'static str,
        /// What would be accepted there.
        accepted: &'static str,
    },
    /// A value that does not parse or does not fit.
    #[error("bad value `{token}` for `{field}`; accepted: {accepted}")]
    BadValue {
        /// The keyword the value is for.
        field: &'static str,
        /// The value as written.
        token: String,
        /// What would be accepted.
        accepted: String,
    },
    /// A keyword at the end of the line without its value.
    #[error("`{token}` needs a value: {accepted}")]
    MissingValue {
        /// The keyword.
        token: String,
        /// What would be accepted after it.
        accepted: &'static str,
    },
    /// A keyword given twice.
    #[error("`{token}` given twice; give it once")]
    Duplicate {
        /// The keyword (second occurrence).
        token: String,
    },
    /// Well-formed words that do not fit together.
    #[error("`{token}`: {reason}")]
    Invalid {
        /// The word the problem is about.
        token: String,
        /// What was wrong and what is accepted.
        reason: String,
    },
}

impl CliError {
    /// The offending token as written.
    pub fn token(&self) -> &str {
        match self {
            CliError::Unknown { token, .. }
            | CliError::BadValue { token, .. }
            | CliError::MissingValue { token, .. }
            | CliError::Duplicate { token }
            | CliError::Invalid { token, .. } => token,
        }
    }

    pub(crate) fn invalid(token: &str, reason: impl Into<String>) -> CliError {
        CliError::Invalid {
            token: token.to_string(),
            reason: reason.into(),
        }
    }

    pub(crate) fn value(field: &'static str, token: &str, accepted: impl Into<String>) -> CliError {
        CliError::BadValue {
            field,
            token: token.to_string(),
            accepted: accepted.into(),
        }
    }
}

/// A file of `lb` lines that was refused: which line, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {source}")]
pub struct CliFileError {
    /// 1-based line number.
    pub line: usize,
    /// What was wrong on it.
    pub source: CliError,
}
