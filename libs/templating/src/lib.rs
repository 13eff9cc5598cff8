//! Templates as data: the YAML document model, validation against the module library,
//! resolution into `ResolvedInfrastructure` snapshots, the snapshot diff and the one renderer
//! of per-resource root configs (`.tf.json`). Pure: nothing here talks to a network or a
//! database; only [`library::Library::load_dir`] reads module files from disk.

pub mod diff;
pub mod document;
pub mod expr;
pub mod hash;
pub mod library;
pub mod module;
pub mod naming;
pub mod params;
pub mod problem;
pub mod render;
pub mod resolve;
pub mod snapshot;
pub mod validate;
pub mod yaml;

pub use diff::{Change, ResourceDiff, diff};
pub use document::{Limits, Template, parse};
pub use library::{Library, LibraryError};
pub use module::{ModuleSpec, TypeSpec};
pub use problem::{Problem, ProblemKind, Problems};
pub use render::{RenderError, RenderedConfig, UpstreamOutputs, escape_template, render};
pub use resolve::{ResolveInput, resolve};
pub use snapshot::{Binding, InstanceOutput, ResolvedResource, Snapshot};
pub use validate::validate;

/// Parses and validates a document, reporting every problem of both steps at once.
pub fn check(text: &str, limits: &Limits, library: &Library) -> Result<Template, Problems> {
    let (template, mut problems) = document::parse_lenient(text, limits);
    let Some(template) = template else {
        return Err(problems.sorted());
    };
    if let Err(more) = validate(&template, library) {
        problems.0.extend(more.0);
    }
    problems.into_result(template)
}

/// Content hash of a template document (its version id): sha256 of the exact bytes.
pub fn content_hash(document: &str) -> String {
    hash::sha256_hex(document.as_bytes())
}
