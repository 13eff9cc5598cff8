//! All SQL of the drift service, per resource: the tracking projection ([`tracking`]),
//! scans and per-target slots ([`scans`]), findings ([`findings`]). Functions take a
//! connection so that use cases compose them in one transaction; none decides policy.

pub mod findings;
pub mod scans;
pub mod tracking;
