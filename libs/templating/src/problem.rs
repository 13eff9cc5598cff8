//! Problems found in a template document or a resolve request, each with a path into the
//! document and a line/column; they are collected and reported together.
use std::fmt;

use crate::yaml::Loc;

/// What kind of problem it is (stable; the service and tests match on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProblemKind {
    /// Not YAML.
    Syntax,
    /// Larger than the document or resource limit.
    TooLarge,
    /// A field has the wrong YAML shape, or is unknown or missing.
    Shape,
    InvalidName,
    UnknownModule,
    UnknownInput,
    MissingInput,
    /// A variable filled from the target's settings was set by the template.
    ReservedInput,
    TypeMismatch,
    WrongUpstreamKind,
    SensitiveOutputWired,
    UnknownParameter,
    UnknownResource,
    UnknownOutput,
    DependencyCycle,
    /// A `${…}` the resolver does not understand or allows only as a whole value.
    InvalidExpression,
    /// A parameter value violates its type, enum, pattern or bounds, or is missing.
    InvalidParameter,
    /// The target's settings lack a value a module needs.
    MissingTargetSetting,
}

impl ProblemKind {
    /// The snake_case name used in APIs.
    pub fn as_str(self) -> &'static str {
        match self {
            ProblemKind::Syntax => "syntax",
            ProblemKind::TooLarge => "too_large",
            ProblemKind::Shape => "shape",
            ProblemKind::InvalidName => "invalid_name",
            ProblemKind::UnknownModule => "unknown_module",
            ProblemKind::UnknownInput => "unknown_input",
            ProblemKind::MissingInput => "missing_input",
            ProblemKind::ReservedInput => "reserved_input",
            ProblemKind::TypeMismatch => "type_mismatch",
            ProblemKind::WrongUpstreamKind => "wrong_upstream_kind",
            ProblemKind::SensitiveOutputWired => "sensitive_output_wired",
            ProblemKind::UnknownParameter => "unknown_parameter",
            ProblemKind::UnknownResource => "unknown_resource",
            ProblemKind::UnknownOutput => "unknown_output",
            ProblemKind::DependencyCycle => "dependency_cycle",
            ProblemKind::InvalidExpression => "invalid_expression",
            ProblemKind::InvalidParameter => "invalid_parameter",
            ProblemKind::MissingTargetSetting => "missing_target_setting",
        }
    }
}

/// One problem: kind, where (`resources.db.inputs.size` and 12:7) and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub kind: ProblemKind,
    pub path: String,
    pub loc: Loc,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at {} ({}): {}",
            self.path,
            self.loc,
            self.kind.as_str(),
            self.message
        )
    }
}

/// Every problem found, in document order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn push(
        &mut self,
        kind: ProblemKind,
        path: impl Into<String>,
        loc: Loc,
        message: impl Into<String>,
    ) {
        self.0.push(Problem {
            kind,
            path: path.into(),
            loc,
            message: message.into(),
        });
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Problem> {
        self.0.iter()
    }

    /// Sorts by location then path, so reports are stable.
    pub fn sorted(mut self) -> Problems {
        self.0
            .sort_by(|a, b| (a.loc, &a.path, a.kind).cmp(&(b.loc, &b.path, b.kind)));
        self.0.dedup();
        self
    }

    /// `Ok(v)` when nothing was found.
    pub fn into_result<T>(self, v: T) -> Result<T, Problems> {
        if self.is_empty() {
            Ok(v)
        } else {
            Err(self.sorted())
        }
    }
}

impl fmt::Display for Problems {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} problem(s)", self.0.len())?;
        for p in &self.0 {
            write!(f, "; {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Problems {}
